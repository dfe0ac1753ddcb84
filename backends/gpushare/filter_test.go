package gpushare

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

func TestFilterNodeShare(t *testing.T) {
	tests := []struct {
		name string
		node *v1.Node
		held []*v1.Pod
		pod  *v1.Pod
		want *device.Status
	}{
		{name: "fits an empty card", node: fourCards(), pod: sharePod("p", 16384)},
		{name: "no request", node: fourCards(), pod: sharePod("p")},
		{name: "request of another mode", node: fourCards(), pod: numberPod("p", 8)},
		{name: "fits the remaining memory", node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "1,2,3"),
			held: []*v1.Pod{placed(sharePod("a", 8192), "0")}, pod: sharePod("p", 8192)},
		{
			name: "insufficient memory is resolvable", node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "2,3"),
			held: []*v1.Pod{placed(sharePod("a", 8192), "0"), placed(sharePod("b", 10000), "1")},
			pod:  sharePod("p", 8193),
			want: device.NewStatus(device.Unschedulable, ReasonCardUnhealthy, ReasonInsufficientMemory),
		},
		{
			name: "unhealthy and too small is unresolvable", node: gpuNode("2", "2048", gpushareproto.AnnotationUnhealthyIDs, "0"),
			pod:  sharePod("p", 2048),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonCardTooSmall, ReasonCardUnhealthy),
		},
		{
			name: "too small even though empty", node: fourCards(), pod: sharePod("p", 16385),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonCardTooSmall),
		},
		{
			name: "card held whole by a gpu-number pod", node: gpuNode("1", "16384"),
			held: []*v1.Pod{placed(numberPod("n", 1), "0")}, pod: sharePod("p", 1),
			want: device.NewStatus(device.Unschedulable, ReasonCardHeldWhole),
		},
		{
			name: "invalid request", node: fourCards(), pod: sharePod("p", -1),
			want: device.NewStatus(device.Error, `invalid GPU request: pod ns/p container "c0": volcano.sh/gpu-memory=-1: `+
				"want a whole number in [0, 1099511627776]"),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t, ModeShare), tc.node, tc.held...)
			for _, policy := range []string{device.PolicyBinpack, device.PolicySpread, ""} {
				if diff := cmp.Diff(tc.want, d.FilterNode(tc.pod, policy)); diff != "" {
					t.Errorf("FilterNode(%q) (-want +got):\n%s", policy, diff)
				}
			}
		})
	}
}

func TestFilterNodeNumber(t *testing.T) {
	tests := []struct {
		name string
		node *v1.Node
		held []*v1.Pod
		pod  *v1.Pod
		want *device.Status
	}{
		{name: "fits idle cards", node: fourCards(), pod: numberPod("p", 4)},
		{name: "no request", node: fourCards(), pod: sharePod("p", 1)},
		{name: "skips busy and unhealthy cards", node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "0"),
			held: []*v1.Pod{placed(sharePod("s", 1), "1")}, pod: numberPod("p", 1, 1)},
		{
			name: "more cards than healthy ones", node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "3"),
			pod:  numberPod("p", 4),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewHealthyCards),
		},
		{
			name: "more cards than the node has", node: fourCards(), pod: numberPod("p", 5),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewHealthyCards),
		},
		{
			name: "cards busy with share and number pods", node: fourCards(),
			held: []*v1.Pod{placed(sharePod("s", 1), "1"), placed(numberPod("n", 2), "0,3")},
			pod:  numberPod("p", 2),
			want: device.NewStatus(device.Unschedulable, ReasonNotEnoughIdleCards),
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t, ModeNumber), tc.node, tc.held...)
			if diff := cmp.Diff(tc.want, d.FilterNode(tc.pod, device.PolicyBinpack)); diff != "" {
				t.Errorf("FilterNode (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScoreNode(t *testing.T) {
	share := newBackend(t, ModeShare)
	number := newBackend(t, ModeNumber)
	emptyShare := devicesOf(t, share, fourCards())
	fullerShare := devicesOf(t, share, fourCards(), placed(sharePod("a", 16384), "0"), placed(sharePod("b", 8192), "1"))
	// An unhealthy card does not count as free memory.
	unhealthyShare := devicesOf(t, share, fourCards(gpushareproto.AnnotationUnhealthyIDs, "0,1"))
	emptyNumber := devicesOf(t, number, fourCards())
	fullerNumber := devicesOf(t, number, fourCards(), placed(numberPod("a", 1), "0"), placed(sharePod("s", 1), "1"))
	tests := []struct {
		name   string
		d      *Devices
		pod    *v1.Pod
		policy string
		want   float64
	}{
		// share: (used + request) / total over healthy cards.
		{name: "share binpack empty", d: emptyShare, pod: sharePod("p", 8192), policy: device.PolicyBinpack, want: 12.5},
		{name: "share binpack fuller", d: fullerShare, pod: sharePod("p", 8192), policy: device.PolicyBinpack, want: 50},
		{name: "share default is binpack", d: fullerShare, pod: sharePod("p", 8192), policy: "", want: 50},
		{name: "share unknown is binpack", d: fullerShare, pod: sharePod("p", 8192), policy: "most", want: 50},
		{name: "share spread empty", d: emptyShare, pod: sharePod("p", 8192), policy: device.PolicySpread, want: 87.5},
		{name: "share spread fuller", d: fullerShare, pod: sharePod("p", 8192), policy: device.PolicySpread, want: 50},
		{name: "share unhealthy cards excluded", d: unhealthyShare, pod: sharePod("p", 8192), policy: device.PolicyBinpack,
			want: 25},
		{name: "share no request", d: fullerShare, pod: sharePod("p"), policy: device.PolicyBinpack, want: 0},
		{name: "share clamped", d: fullerShare, pod: sharePod("p", 1<<30), policy: device.PolicyBinpack, want: 100},
		// number: (busy + requested) / healthy cards.
		{name: "number binpack empty", d: emptyNumber, pod: numberPod("p", 1), policy: device.PolicyBinpack, want: 25},
		{name: "number binpack fuller", d: fullerNumber, pod: numberPod("p", 1), policy: device.PolicyBinpack, want: 75},
		{name: "number spread empty", d: emptyNumber, pod: numberPod("p", 1), policy: device.PolicySpread, want: 75},
		{name: "number spread fuller", d: fullerNumber, pod: numberPod("p", 1), policy: device.PolicySpread, want: 25},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.d.ScoreNode(tc.pod, tc.policy); got != tc.want {
				t.Errorf("ScoreNode = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScoreOrdering(t *testing.T) {
	for _, mode := range []Mode{ModeShare, ModeNumber} {
		t.Run(string(mode), func(t *testing.T) {
			b := newBackend(t, mode)
			pod, held := sharePod("p", 4096), sharePod("held", 8192)
			if mode == ModeNumber {
				pod, held = numberPod("p", 1), numberPod("held", 1)
			}
			empty := devicesOf(t, b, fourCards())
			fuller := devicesOf(t, b, fourCards(), placed(held, "2"))
			if e, f := empty.ScoreNode(pod, device.PolicyBinpack), fuller.ScoreNode(pod, device.PolicyBinpack); !(f > e) {
				t.Errorf("binpack: fuller node %v, empty node %v; want the fuller node higher", f, e)
			}
			if e, f := empty.ScoreNode(pod, device.PolicySpread), fuller.ScoreNode(pod, device.PolicySpread); !(e > f) {
				t.Errorf("spread: fuller node %v, empty node %v; want the empty node higher", f, e)
			}
		})
	}
}
