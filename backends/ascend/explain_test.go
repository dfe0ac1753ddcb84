package ascend

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/device"
)

func TestExplainCardsAndLayouts(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	d := devicesOf(t, b, ascendNode("n", "Ascend910B3", []card{npu("npu-0", 65536), npu("npu-1", 65536).unhealthy(), npu("npu-2", 65536)}))
	for _, name := range []string{"a", "b"} {
		testkit.Allocate(t, d, npuPod(name, "Ascend910B3", []ctr{{n: 1, mem: 12000, cores: -1}}), device.PolicyBinpack)
	}
	testkit.Allocate(t, d, npuPod("w", "Ascend910B3", []ctr{{n: 1, mem: -1, cores: -1}}), device.PolicyBinpack)
	want := []string{"vir05_1c_16g x2", "", "whole chip x1"}
	if diff := cmp.Diff(want, d.CardLayouts()); diff != "" {
		t.Errorf("layouts (-want +got):\n%s", diff)
	}

	if got := d.ExplainCards(npuPod("fits", "Ascend910B3", []ctr{{n: 1, mem: 12000, cores: -1}}), device.PolicyBinpack); got != nil {
		t.Errorf("a pod that fits: verdicts %+v, want nil", got)
	}
	got := d.ExplainCards(npuPod("whole", "Ascend910B3", []ctr{{n: 1, mem: -1, cores: -1}}), device.PolicyBinpack)
	wantV := []device.CardVerdict{
		{Index: 0, Reason: ReasonWholeBusy, Resolvable: true},
		{Index: 1, Reason: ReasonUnhealthy},
		{Index: 2, Reason: ReasonWholeBusy, Resolvable: true},
	}
	if diff := cmp.Diff(wantV, got); diff != "" {
		t.Errorf("verdicts for a whole chip (-want +got):\n%s", diff)
	}

	soft := devicesOf(t, newTestBackend(t, "Ascend910B3", true), ascendNode("s", "Ascend910B3", []card{npu("npu-0", 65536)}))
	if diff := cmp.Diff([]string{""}, soft.CardLayouts()); diff != "" {
		t.Errorf("hami-core layouts (-want +got):\n%s", diff)
	}
}
