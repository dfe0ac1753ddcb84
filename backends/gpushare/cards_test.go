package gpushare

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

func TestCardUsage(t *testing.T) {
	share := newBackend(t, ModeShare)
	d := devicesOf(t, share, fourCards(gpushareproto.AnnotationUnhealthyIDs, "3"),
		placed(sharePod("a", 4000), "0"), placed(sharePod("b", 2000), "0"), placed(numberPod("w", 1), "2"))
	cards, pods := d.CardUsage()
	want := []device.CardUsage{
		{ID: "0", Index: 0, Healthy: true, MemoryUsedMiB: 6000, MemoryTotalMiB: 16384, Pods: 2},
		{ID: "1", Index: 1, Healthy: true, MemoryTotalMiB: 16384},
		// A gpu-number pod holds the card whole.
		{ID: "2", Index: 2, Healthy: true, MemoryUsedMiB: 16384, MemoryTotalMiB: 16384, Pods: 1},
		{ID: "3", Index: 3, Healthy: false, MemoryTotalMiB: 16384},
	}
	if diff := cmp.Diff(want, cards); diff != "" {
		t.Errorf("CardUsage (-want +got):\n%s", diff)
	}
	if pods != 3 {
		t.Errorf("pods holding cards = %d, want 3", pods)
	}
}
