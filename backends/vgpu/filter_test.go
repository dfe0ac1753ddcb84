package vgpu

import (
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func TestFilterChecks(t *testing.T) {
	v100 := gpu("GPU-0", 16384)
	t4 := gpu("GPU-1", 16384).withType("NVIDIA-Tesla T4")
	tests := []struct {
		name  string
		cards []card
		held  []*v1.Pod
		pod   *v1.Pod
		want  *device.Status
	}{
		{name: "fits", cards: []card{v100}, pod: one("p", 1, 16384, 100)},
		{name: "unhealthy card is never chosen", cards: []card{v100.unhealthy()}, pod: one("p", 1, 1, 0),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonUnhealthy)},
		{name: "use-gputype keeps matching cards", cards: []card{v100, t4}, pod: one("p", 2, 1, 0, vgpuproto.AnnotationUseType, "t4"),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewFitting, ReasonTypeMismatch)},
		{name: "use-gputype list", cards: []card{v100, t4}, pod: one("p", 2, 1, 0, vgpuproto.AnnotationUseType, "T4,V100")},
		{name: "nouse-gputype excludes", cards: []card{v100, t4}, pod: one("p", 1, 1, 0, vgpuproto.AnnotationNoUseType, "v100,t4"),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTypeMismatch)},
		{name: "use-gpuuuid", cards: []card{v100, t4}, pod: one("p", 2, 1, 0, vgpuproto.AnnotationUseUUID, "GPU-1"),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewFitting, ReasonUUIDExcluded)},
		{name: "nouse-gpuuuid", cards: []card{v100, t4}, pod: one("p", 1, 1, 0, vgpuproto.AnnotationNoUseUUID, "GPU-0, GPU-1"),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonUUIDExcluded)},
		{name: "share count", cards: []card{v100.withCount(1)}, held: []*v1.Pod{placed(one("a", 1, 1, 0), "GPU-0,NVIDIA,1,0:")},
			pod: one("p", 1, 1, 0), want: device.NewStatus(device.Unschedulable, ReasonShareCountFull)},
		{name: "memory", cards: []card{v100}, held: []*v1.Pod{placed(one("a", 1, 10000, 0), "GPU-0,NVIDIA,10000,0:")},
			pod: one("p", 1, 6385, 0), want: device.NewStatus(device.Unschedulable, ReasonInsufficientMem)},
		{name: "card too small", cards: []card{v100}, pod: one("p", 1, 16385, 0),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonCardTooSmall)},
		{name: "cores", cards: []card{v100}, held: []*v1.Pod{placed(one("a", 1, 1, 60), "GPU-0,NVIDIA,1,60:")},
			pod: one("p", 1, 1, 41), want: device.NewStatus(device.Unschedulable, ReasonInsufficientCore)},
		{name: "cores=100 needs an unused card", cards: []card{v100}, held: []*v1.Pod{placed(one("a", 1, 1, 0), "GPU-0,NVIDIA,1,0:")},
			pod: one("p", 1, 1, 100), want: device.NewStatus(device.Unschedulable, ReasonExclusiveBusy)},
		{name: "a full card refuses cores=0", cards: []card{v100}, held: []*v1.Pod{placed(one("a", 1, 1, 100), "GPU-0,NVIDIA,1,100:")},
			pod: one("p", 1, 1, 0), want: device.NewStatus(device.Unschedulable, ReasonCardCoresFull)},
		{name: "mode", cards: []card{v100}, pod: one("p", 1, 1, 0, vgpuproto.AnnotationMode, vgpuproto.ModeMIG),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonModeMismatch)},
		{name: "mode matches", cards: []card{v100}, pod: one("p", 1, 1, 0, vgpuproto.AnnotationMode, vgpuproto.ModeHAMiCore)},
		{name: "podgroup spread keeps gang members apart", cards: []card{v100},
			held: []*v1.Pod{placed(one("a", 1, 1, 0, AnnotationGroupName, "pg"), "GPU-0,NVIDIA,1,0:")},
			pod:  one("p", 1, 1, 0, AnnotationGroupName, "pg", vgpuproto.AnnotationPodGroupPolicy, vgpuproto.PodGroupPolicySpread),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonGangOnCard)},
		{name: "podgroup spread ignores other gangs", cards: []card{v100},
			held: []*v1.Pod{placed(one("a", 1, 1, 0, AnnotationGroupName, "other"), "GPU-0,NVIDIA,1,0:")},
			pod:  one("p", 1, 1, 0, AnnotationGroupName, "pg", vgpuproto.AnnotationPodGroupPolicy, vgpuproto.PodGroupPolicySpread)},
		{name: "without spread gang members may share", cards: []card{v100},
			held: []*v1.Pod{placed(one("a", 1, 1, 0, AnnotationGroupName, "pg"), "GPU-0,NVIDIA,1,0:")},
			pod:  one("p", 1, 1, 0, AnnotationGroupName, "pg")},
		{name: "more cards than the node has", cards: []card{v100, t4}, pod: one("p", 3, 1, 0),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewCards)},
		{name: "a busy card makes the node resolvable", cards: []card{v100, t4.unhealthy()},
			held: []*v1.Pod{placed(one("a", 1, 16000, 0), "GPU-0,NVIDIA,16000,0:")}, pod: one("p", 1, 1000, 0),
			want: device.NewStatus(device.Unschedulable, ReasonInsufficientMem, ReasonUnhealthy)},
		{name: "second container sees the first one's cards", cards: []card{v100},
			pod:  vpod("p", []ctr{{1, 10000, -1, 0}, {1, 10000, -1, 0}}),
			want: device.NewStatus(device.Unschedulable, ReasonInsufficientMem)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t), vgpuNode(tc.cards), tc.held...)
			for _, policy := range []string{device.PolicyBinpack, device.PolicySpread} {
				if diff := cmp.Diff(tc.want, d.FilterNode(tc.pod, policy)); diff != "" {
					t.Errorf("FilterNode(%s) (-want +got):\n%s", policy, diff)
				}
				r, err := d.DeepCopy().Allocate(tc.pod, policy)
				if (err == nil) != (tc.want == nil) {
					t.Errorf("Allocate(%s) = %v, %v; must succeed exactly when FilterNode does", policy, r, err)
				}
			}
		})
	}
}

func TestFilterInvalidRequest(t *testing.T) {
	d := devicesOf(t, newBackend(t), fourCards())
	st := d.FilterNode(one("p", 1, 1, 0, vgpuproto.AnnotationMode, "x"), "")
	if st.Code != device.Error || len(st.Reasons) != 1 {
		t.Errorf("FilterNode of an invalid request = %+v, want one Error reason", st)
	}
	if d.FilterNode(vpod("p", []ctr{{-1, -1, -1, -1}}), "") != nil || d.ScoreNode(vpod("p", nil), "") != 0 {
		t.Error("a pod without a request must fit and score 0")
	}
}

// ScoreNode after FilterNode returns the score FilterNode computed for the
// same cards; once the node's cards change (an allocation), it is computed
// again, so both paths always agree with a node that never filtered.
func TestScoreAfterFilterMatchesAFreshScore(t *testing.T) {
	b := newBackend(t)
	for _, policy := range []string{device.PolicyBinpack, device.PolicySpread} {
		d := devicesOf(t, b, fourCards(), placed(one("held", 1, 8000, 20), "GPU-1,NVIDIA,8000,20:"))
		pod := one("p", 1, 4000, 10)
		for step := 0; step < 3; step++ {
			if st := d.FilterNode(pod, policy); st != nil {
				t.Fatalf("%s step %d: FilterNode: %v", policy, step, st.Message())
			}
			fresh := d.DeepCopy().(*Devices) // no memo
			if got, want := d.ScoreNode(pod, policy), fresh.ScoreNode(pod, policy); got != want {
				t.Errorf("%s step %d: score after filter %v, fresh %v", policy, step, got, want)
			}
			allocated(t, d, one("filler-"+strconv.Itoa(step), 1, 4000, 10), policy) // the cards change
			if got, want := d.ScoreNode(pod, policy), d.DeepCopy().ScoreNode(pod, policy); got != want {
				t.Errorf("%s step %d: score after an allocation %v, fresh %v (stale memo)", policy, step, got, want)
			}
		}
	}
}

// The filter memo is keyed by the whole request: a pod asking the same as
// the last one gets its result, one that differs in any way (a UUID or type
// selector, a mode, a PodGroup to spread) is filtered afresh.
func TestFilterMemoFollowsTheRequest(t *testing.T) {
	b := newBackend(t)
	d := devicesOf(t, b, fourCards(), placed(one("held", 1, 16000, 20), "GPU-1,NVIDIA,16000,20:"))
	tests := []struct {
		name string
		pod  *v1.Pod
		fits bool
	}{
		{"fits anywhere", one("a", 1, 1000, 10), true},
		{"same request, another pod", one("b", 1, 1000, 10), true},
		{"only the full card", one("c", 1, 1000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"), false},
		{"same as the first again", one("d", 1, 1000, 10), true},
		{"excludes every card", one("e", 1, 1000, 10, vgpuproto.AnnotationNoUseUUID, "GPU-0,GPU-1,GPU-2,GPU-3"), false},
		{"another mode", one("f", 1, 1000, 10, vgpuproto.AnnotationMode, vgpuproto.ModeMIG), false},
		{"four cards", one("g", 4, 1000, 10), false},
		{"three cards", one("h", 3, 1000, 10), true},
	}
	for _, tc := range tests {
		st := d.FilterNode(tc.pod, device.PolicyBinpack)
		fresh := d.DeepCopy().FilterNode(tc.pod, device.PolicyBinpack)
		if (st == nil) != tc.fits || st.Message() != fresh.Message() {
			t.Errorf("%s: FilterNode = %q, fresh %q, want fits=%v", tc.name, st.Message(), fresh.Message(), tc.fits)
		}
	}
}
