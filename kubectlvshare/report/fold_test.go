package report

import (
	"strings"
	"testing"
)

func labels[T any](runs []span[T]) string {
	out := make([]string, len(runs))
	for i, r := range runs {
		out[i] = r.label()
	}
	return strings.Join(out, " ")
}

// Idle, healthy twins next to each other fold into one row; a busy card, an
// unhealthy one, another model or a gap in the indexes ends the run.
func TestFoldIdle(t *testing.T) {
	card := func(i int, model string, used int64, healthy bool) Card {
		return Card{Device: "hamivgpu", Index: i, Model: model, MemoryTotalMiB: 40960, MemoryUsedMiB: used, Healthy: healthy}
	}
	cards := []Card{
		card(0, "A100", 1000, true),
		card(1, "A100", 0, true), card(2, "A100", 0, true), card(3, "A100", 0, true),
		card(4, "H100", 0, true),
		card(5, "H100", 0, false),
		card(6, "H100", 0, true), card(8, "H100", 0, true),
	}
	if got, want := labels(foldIdle(cards, true)), "0 1-3 4 5 6 8"; got != want {
		t.Errorf("folded: %q, want %q", got, want)
	}
	runs := foldIdle(cards, true)
	if runs[1].n != 3 || runs[1].first.Index != 1 || runs[1].last.Index != 3 {
		t.Errorf("run 1-3: n=%d first=%d last=%d", runs[1].n, runs[1].first.Index, runs[1].last.Index)
	}
	if got, want := labels(foldIdle(cards, false)), "0 1 2 3 4 5 6 8"; got != want {
		t.Errorf("unfolded: %q, want %q", got, want)
	}
}

func TestFoldVerdicts(t *testing.T) {
	vs := []CardVerdict{
		{Index: 0, Reason: "a"}, {Index: 1, Reason: "a"}, {Index: 2, Reason: "b"},
		{Index: 3, Reason: "b"}, {Index: 5, Reason: "b"},
	}
	if got, want := labels(foldVerdicts(vs, true)), "0-1 2-3 5"; got != want {
		t.Errorf("folded: %q, want %q", got, want)
	}
	if got, want := labels(foldVerdicts(vs, false)), "0 1 2 3 5"; got != want {
		t.Errorf("unfolded: %q, want %q", got, want)
	}
}
