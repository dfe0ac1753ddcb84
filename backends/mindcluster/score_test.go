package mindcluster

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// TestBatchScore checks the node order: nodes needing a downgrade last,
// then the fewest free AI cores (binpack) or the most (spread); nodes the
// pod does not fit get no score.
func TestBatchScore(t *testing.T) {
	b := newBackend(t, Options{})
	nodes := map[string]device.Devices{
		// Two idle chips: 16 free AI cores.
		"idle": newDevicesFor(t, b, node310P("idle", 2, chips(0, 1))),
		// One chip with a vir04 and a vir02: 2 free AI cores, but no AI CPU
		// left for a high vir02, which must downgrade.
		"downgrade": newDevicesFor(t, b, node310P("downgrade", 1, chips(0)),
			placed(corePod("a", 4, mindclusterproto.LabelVNPULevel, "high"), "0-vir04", true),
			placed(corePod("b", 2, mindclusterproto.LabelVNPULevel, "high"), "0-vir02", true)),
		// One chip with a vir04_3c: 4 free AI cores.
		"busy": newDevicesFor(t, b, node310P("busy", 1, chips(0)), placed(corePod("c", 4), "0-vir04_3c", true)),
		// One chip, 7 free AI cores.
		"light": newDevicesFor(t, b, node310P("light", 1, chips(0)), placed(corePod("d", 1), "0-vir01", true)),
		// Held whole: does not fit.
		"full": newDevicesFor(t, b, node310P("full", 1, chips(0)), placed(corePod("e", 8), "0", true)),
	}
	pod := corePod("p", 2, mindclusterproto.LabelVNPULevel, "high")
	tests := []struct {
		policy string
		want   map[string]float64
	}{
		{device.PolicyBinpack, map[string]float64{"busy": 100, "light": 75, "idle": 50, "downgrade": 25}},
		{device.PolicySpread, map[string]float64{"idle": 100, "light": 75, "busy": 50, "downgrade": 25}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, b.BatchScore(pod, tc.policy, nodes)); diff != "" {
			t.Errorf("%s scores (-want +got):\n%s", tc.policy, diff)
		}
	}
	if got := b.BatchScore(corePod("bad", 3), device.PolicyBinpack, nodes); len(got) != 0 {
		t.Errorf("an invalid request got scores %v", got)
	}
}

func TestScoreNode(t *testing.T) {
	b := newBackend(t, Options{})
	d := newDevicesFor(t, b, node310P("n", 2, chips(0, 1)), placed(corePod("a", 4), "0-vir04_3c", true))
	pod := corePod("p", 1)
	// 4 of 16 AI cores in use.
	if got := d.ScoreNode(pod, device.PolicyBinpack); got != 25 {
		t.Errorf("binpack score = %v, want 25", got)
	}
	if got := d.ScoreNode(pod, device.PolicySpread); got != 75 {
		t.Errorf("spread score = %v, want 75", got)
	}
	if got := d.ScoreNode(corePod("p", 24), device.PolicyBinpack); got != 0 {
		t.Errorf("score of a pod that does not fit = %v, want 0", got)
	}
}
