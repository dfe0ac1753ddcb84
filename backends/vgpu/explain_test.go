package vgpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func TestExplainCards(t *testing.T) {
	b := newBackend(t)
	node := vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384).unhealthy(), gpu("GPU-2", 8192),
		gpu("GPU-3", 16384).withType("NVIDIA-T4")})
	d := devicesOf(t, b, node, placed(one("filler", 1, 10000, 0), "GPU-0,NVIDIA,10000,0:"))
	noT4 := []string{vgpuproto.AnnotationNoUseType, "T4"}
	tests := []struct {
		name string
		pod  *v1.Pod
		want []device.CardVerdict
	}{
		{name: "fits", pod: one("small", 1, 4000, 0, noT4...), want: nil},
		{name: "every card refuses", pod: one("big", 1, 12000, 0, noT4...), want: []device.CardVerdict{
			{Index: 0, Reason: ReasonInsufficientMem, Resolvable: true},
			{Index: 1, Reason: ReasonUnhealthy},
			{Index: 2, Reason: ReasonCardTooSmall},
			{Index: 3, Reason: ReasonTypeMismatch},
		}},
		{name: "the init container refused", pod: withInit(one("init", 1, 4000, 0, noT4...), "i", ctr{1, 12000, -1, 0}), want: []device.CardVerdict{
			{Index: 0, InitContainer: true, Reason: ReasonInsufficientMem, Resolvable: true},
			{Index: 1, InitContainer: true, Reason: ReasonUnhealthy},
			{Index: 2, InitContainer: true, Reason: ReasonCardTooSmall},
			{Index: 3, InitContainer: true, Reason: ReasonTypeMismatch},
		}},
		{name: "a card fits but two are asked for", pod: one("two", 2, 12000, 0), want: []device.CardVerdict{
			{Index: 0, Reason: ReasonInsufficientMem, Resolvable: true},
			{Index: 1, Reason: ReasonUnhealthy},
			{Index: 2, Reason: ReasonCardTooSmall},
			{Index: 3},
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := d.ExplainCards(tc.pod, device.PolicyBinpack)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("verdicts (-want +got):\n%s", diff)
			}
			if st := d.FilterNode(tc.pod, device.PolicyBinpack); st.IsSuccess() != (tc.want == nil) {
				t.Errorf("FilterNode success = %v, ExplainCards = %v", st.IsSuccess(), got)
			}
		})
	}
}

func TestCardLayouts(t *testing.T) {
	b := newBackend(t)
	node := vgpuNode([]card{
		gpu("GPU-m", 40960).withType("NVIDIA-A100-SXM4-40GB").withCount(7).inMode(vgpuproto.ModeMIG),
		gpu("GPU-i", 40960).withType("NVIDIA-A100-SXM4-40GB").withCount(7).inMode(vgpuproto.ModeMIG),
		gpu("GPU-s", 16384),
		gpu("GPU-p", 16384).inMode(vgpuproto.ModeMPS),
	})
	d := devicesOf(t, b, node,
		placed(one("a", 1, 4000, 0), "GPU-m[group1-0],NVIDIA,4000,0:"),
		placed(one("b", 1, 4000, 0), "GPU-m[group1-1],NVIDIA,4000,0:"))
	want := []string{"mig group1: 1g.5gb x2 of 7 instances", "mig idle", "", vgpuproto.ModeMPS}
	if diff := cmp.Diff(want, d.CardLayouts()); diff != "" {
		t.Errorf("layouts (-want +got):\n%s", diff)
	}
}
