package vgpu

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// exclusiveBackend has two rules: 0 {team: a, gpu-exclusive: "true"} and
// 1 {workload: inference}.
func exclusiveBackend(t testing.TB) *Backend {
	t.Helper()
	cfg := config.Default().NVIDIA
	b, err := New(Options{Config: &cfg, Clock: clocktesting.NewFakePassiveClock(time.Unix(testUnix, 0)),
		ExclusiveRules: []device.ExclusiveRule{
			{Labels: map[string]string{"team": "a", "gpu-exclusive": "true"}},
			{Labels: map[string]string{"workload": "inference"}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// labelled returns a copy of the pod with the label key/value pairs.
func labelled(p *v1.Pod, kv ...string) *v1.Pod {
	out := p.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out.Labels[kv[i]] = kv[i+1]
	}
	return out
}

var (
	matchA    = []string{"team", "a", "gpu-exclusive", "true"}
	matchInf  = []string{"workload", "inference"}
	matchBoth = append(append([]string{}, matchA...), matchInf...)
)

func TestExclusiveRulesFilter(t *testing.T) {
	oneCard := []card{gpu("GPU-0", 16384)}
	held := func(name string, kv ...string) *v1.Pod {
		return labelled(placed(one(name, 1, 1000, 0), "GPU-0,NVIDIA,1000,0:"), kv...)
	}
	busy := device.NewStatus(device.Unschedulable, ReasonExclusiveRule)
	tests := []struct {
		name  string
		cards []card
		held  []*v1.Pod
		pod   *v1.Pod
		want  *device.Status
	}{
		{name: "two pods of one rule do not share", cards: oneCard, held: []*v1.Pod{held("a1", matchA...)},
			pod: labelled(one("p", 1, 1000, 0), matchA...), want: busy},
		{name: "a rule needs all its labels", cards: oneCard, held: []*v1.Pod{held("a1", "team", "a")},
			pod: labelled(one("p", 1, 1000, 0), matchA...)},
		{name: "a matching pod shares with a non-matching one", cards: oneCard, held: []*v1.Pod{held("n1", "team", "b")},
			pod: labelled(one("p", 1, 1000, 0), matchA...)},
		{name: "a non-matching pod shares with a matching one", cards: oneCard, held: []*v1.Pod{held("a1", matchA...)},
			pod: one("p", 1, 1000, 0)},
		{name: "pods of different rules share", cards: oneCard, held: []*v1.Pod{held("i1", matchInf...)},
			pod: labelled(one("p", 1, 1000, 0), matchA...)},
		{name: "a pod of two rules avoids both", cards: oneCard, held: []*v1.Pod{held("i1", matchInf...)},
			pod: labelled(one("p", 1, 1000, 0), matchBoth...), want: busy},
		{name: "a card holding a pod of two rules refuses either", cards: oneCard, held: []*v1.Pod{held("b1", matchBoth...)},
			pod: labelled(one("p", 1, 1000, 0), matchInf...), want: busy},
		{name: "another card is free", cards: []card{gpu("GPU-0", 16384), gpu("GPU-1", 16384)},
			held: []*v1.Pod{held("a1", matchA...)}, pod: labelled(one("p", 1, 1000, 0), matchA...)},
		{name: "two cards asked, one free", cards: []card{gpu("GPU-0", 16384), gpu("GPU-1", 16384)},
			held: []*v1.Pod{held("a1", matchA...)}, pod: labelled(one("p", 2, 1000, 0), matchA...),
			want: device.NewStatus(device.Unschedulable, ReasonTooFewFitting, ReasonExclusiveRule)},
		{name: "cards in another mode than hami-core are not kept apart", cards: []card{gpu("GPU-0", 16384).inMode("mps")},
			held: []*v1.Pod{held("a1", matchA...)}, pod: labelled(one("p", 1, 1000, 0), matchA...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := devicesOf(t, exclusiveBackend(t), vgpuNode(tt.cards), tt.held...)
			if diff := cmp.Diff(tt.want, d.FilterNode(tt.pod, device.PolicyBinpack)); diff != "" {
				t.Errorf("FilterNode (-want +got):\n%s", diff)
			}
		})
	}
}

// TestExclusiveRulesAllocateRelease: allocations within one Devices keep
// rule-matching pods apart, binpack still packs the others, and releasing
// gives the card back to the rule.
func TestExclusiveRulesAllocateRelease(t *testing.T) {
	d := devicesOf(t, exclusiveBackend(t), fourCards())
	a1 := labelled(one("a1", 1, 1000, 0), matchA...)
	a2 := labelled(one("a2", 1, 1000, 0), matchA...)
	n1 := one("n1", 1, 1000, 0)
	first := allocated(t, d, a1, device.PolicyBinpack)
	second := allocated(t, d, a2, device.PolicyBinpack)
	if firstCard(first) == firstCard(second) {
		t.Fatalf("a1 %q and a2 %q share a card", first, second)
	}
	if got := allocated(t, d, n1, device.PolicyBinpack); firstCard(got) != firstCard(first) && firstCard(got) != firstCard(second) {
		t.Errorf("n1 got %q; binpack should put it on a card already in use", got)
	}
	status := d.GetStatus()
	if !strings.Contains(status, "rules [0x1]") {
		t.Errorf("GetStatus %q does not show the rule holders", status)
	}
	if err := d.Release(a2, &device.Reservation{Annotations: map[string]string{vgpuproto.AnnotationIDs: second}}); err != nil {
		t.Fatal(err)
	}
	a3 := labelled(one("a3", 4, 1000, 0), matchA...)
	if st := d.FilterNode(a3, device.PolicyBinpack); st == nil {
		t.Fatal("a3 asks for all four cards while a1 holds one; it fits")
	}
	if err := d.SubResource(a1); err != nil {
		t.Fatal(err)
	}
	if st := d.FilterNode(a3, device.PolicyBinpack); st != nil {
		t.Errorf("after a1 and a2 left, a3 still refused: %v", st.Message())
	}
}

// TestExclusiveRulesFromAnnotations: a rule-matching pod accounted from its
// allocation annotation (as after a scheduler restart) holds its card for
// the rule; relabelled copies do not.
func TestExclusiveRulesFromAnnotations(t *testing.T) {
	b := exclusiveBackend(t)
	holder := labelled(placed(one("a1", 1, 1000, 0), "GPU-1,NVIDIA,1000,0:"), matchA...)
	d := devicesOf(t, b, fourCards(), holder)
	got := d.ExplainCards(labelled(one("p", 4, 1000, 0), matchA...), device.PolicyBinpack)
	if len(got) != 4 || got[1].Reason != ReasonExclusiveRule || got[0].Reason != "" {
		t.Errorf("ExplainCards = %+v, want card 1 refused by the rule", got)
	}
}

// firstCard is the UUID of the first card an allocation names.
func firstCard(ids string) string { return ids[:strings.IndexByte(ids, ',')] }
