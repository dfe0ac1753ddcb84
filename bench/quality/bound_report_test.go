package quality

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestClosed(t *testing.T) {
	if got := Closed(96, 95, 98); math.Abs(got-1.0/3) > 1e-12 {
		t.Errorf("Closed(96, 95, 98) = %v, want 1/3", got)
	}
	if got := Closed(94, 95, 98); got >= 0 {
		t.Errorf("Closed(94, 95, 98) = %v, want negative (further from the bound than the base)", got)
	}
	if got := Closed(96, 98, 98); !math.IsNaN(got) {
		t.Errorf("Closed with the base at the bound = %v, want NaN", got)
	}
}

func TestBoundReport(t *testing.T) {
	res := func(trace, policy string, a100, a130 float64) *Result {
		return &Result{Trace: trace, Policy: policy, Seeds: []int64{42}, Alloc100: a100, Alloc130: a130,
			SeedAlloc100: []float64{a100}, SeedAlloc130: []float64{a130}}
	}
	results := []*Result{
		res("default", PolicyFragment, 96, 96.5), res("default", PolicyFGD, 95, 95.5),
		res("gpushare20", PolicyFragment, 90, 91), res("gpushare20", PolicyFGD, 91, 92),
		res("gpushare100", PolicyFragment, 86, 87), res("gpushare100", PolicyFGD, 84, 86.5),
	}
	limits := map[string]Limit{
		"default":    {Bound: Bound{Alloc100: 99, Alloc130: 98.5}, Offline: Bound{Alloc100: 98, Alloc130: 97.5}},
		"gpushare20": {Bound: Bound{Alloc100: 95, Alloc130: 96}, Offline: Bound{Alloc100: 91, Alloc130: 92}},
		// The offline packing found nothing above fragment: its share of
		// FGD's distance to it is 100% and stays out of the mean.
		"gpushare100": {Bound: Bound{Alloc100: 90, Alloc130: 92}, Offline: Bound{Alloc100: 86, Alloc130: 87}},
	}
	var b bytes.Buffer
	if err := WriteBoundTable(&b, results, limits); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"| default | tuning | 98.50 | 97.50 | 95.50 | 96.50 | 33% | 50% | 99.00 | 98.00 | 95.00 | 96.00 | 25% | 33% |",
		// FGD at the offline packing: no distance to close.
		"| gpushare20 | held-out | 96.00 | 92.00 | 92.00 | 91.00 | -25% | n/a | 95.00 | 91.00 | 91.00 | 90.00 | -25% | n/a |",
		"| gpushare100 | tuning | 92.00 | 87.00 | 86.50 | 87.00 | 9% | 100% | 90.00 | 86.00 | 84.00 | 86.00 | 33% | 100% |",
		"On the 2 tuning traces fragment closes on average 21% of FGD's distance to the bound at 130% arrival and 29% at 100%. " +
			"Of FGD's distance to the offline packing, on the tuning traces where that packing is above fragment, it closes 50% at 130% (default) and 33% at 100% (default). " +
			"The offline packing is on average 3.00 points below the bound at 130% and 2.50 at 100%.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bound table lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteCSVColumns(&b, append(CSVColumns(), BoundColumns(map[string]Limit{"default": limits["default"]})...), results[:1]); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if !strings.HasSuffix(lines[0], ",tuning,bound100,bound130,offline100,offline130") || !strings.HasSuffix(lines[1], ",yes,99.00,98.50,98.00,97.50") {
		t.Errorf("CSV with bound columns:\n%s", b.String())
	}
}
