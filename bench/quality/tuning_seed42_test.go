package quality

import "testing"

// tuningTraces are the five traces of docs/quality.md's table, the only
// ones any policy may be tuned on (issue 19).
var tuningTraces = []string{"default", "gpushare100", "multigpu50", "gpuspec33", "cpu250"}

// TestFragmentBelowFGDSeed42 runs FGD and our fragment policy (through the
// vGPU backend) at seed 42 on each tuning trace and checks that fragment
// leaves less GPU unallocated at 130% arrival than FGD. FGD's values come
// from the simulator, which reproduces the published ones (TestAnchorsSeed42
// on default; docs/quality.md for the ten-seed means). `make quality-check`
// runs it without the race detector, where it takes seconds per trace.
func TestFragmentBelowFGDSeed42(t *testing.T) {
	skipSlow(t)
	for _, name := range tuningTraces {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			tr := loadTrace(t, name)
			fgd := runSeed(t, tr, PolicyFGD, 42)
			frag := runSeed(t, tr, PolicyFragment, 42)
			t.Logf("%s, seed 42, unallocated GPU %% at 130%% arrival: fragment %.2f, FGD %.2f (allocated at 100%%/130%%: fragment %.2f/%.2f, FGD %.2f/%.2f)",
				name, 100-frag.At(130), 100-fgd.At(130), frag.At(100), frag.At(130), fgd.At(100), fgd.At(130))
			if frag.At(130) <= fgd.At(130) {
				t.Errorf("%s, seed 42: fragment leaves %.2f%% of the GPU unallocated at 130%% arrival, FGD %.2f%%; want fragment below FGD",
					name, 100-frag.At(130), 100-fgd.At(130))
			}
		})
	}
}
