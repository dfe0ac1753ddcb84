package quality

import (
	"os"
	"testing"
)

// TestFragmentBeatsBestFit runs our fragment policy, through the vGPU
// backend, on the default trace with seed 42 and checks that it leaves
// less GPU unallocated at 130% arrival than BestFit's anchor (93.13) and
// FGD's (95.29). It takes seconds, minutes under the race detector, where
// it runs only with VSHARE_QUALITY_FULL=1.
func TestFragmentBeatsBestFit(t *testing.T) {
	if raceEnabled && os.Getenv("VSHARE_QUALITY_FULL") == "" {
		t.Skip("slow under -race; set VSHARE_QUALITY_FULL=1 to run it")
	}
	if testing.Short() {
		t.Skip("full trace run skipped in -short mode")
	}
	tr := loadTrace(t, "default")
	c := runSeed(t, tr, PolicyFragment, 42)
	got := c.At(130)
	t.Logf("fragment, default trace, seed 42: allocation %.2f%% at 100%% arrival, %.2f%% at 130%%", c.At(100), got)
	if got <= 93.13 {
		t.Errorf("fragment allocates %.2f%% at 130%% arrival, want more than BestFit's 93.13%%", got)
	}
	if got <= 95.29 {
		t.Errorf("fragment allocates %.2f%% at 130%% arrival, want more than FGD's 95.29%%", got)
	}
}
