package quality

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// earlyBins is the published allocation at arrival 0..12% of the default
// trace, seed 42, the same for every policy (nothing fails that early).
var earlyBins = []float64{0.25, 1.04, 2.01, 3.01, 3.98, 5.06, 5.98, 7.02, 8.03, 8.99, 10.03, 11.03, 12.00}

// TestAnchorsSeed42 checks the reference policies against the published
// seed-42 values of the default trace, exactly.
func TestAnchorsSeed42(t *testing.T) {
	tr := loadTrace(t, "default")
	tests := []struct {
		name               string
		policy             string
		alloc100, alloc130 float64
	}{
		{name: "BestFit", policy: PolicyBestFit, alloc100: 92.94, alloc130: 93.13},
		{name: "FGD", policy: PolicyFGD, alloc100: 95.14, alloc130: 95.29},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := runSeed(t, tr, tc.policy, 42)
			if got := [2]float64{c.At(100), c.At(130)}; got != [2]float64{tc.alloc100, tc.alloc130} {
				t.Errorf("allocation at 100%%/130%% arrival = %.2f/%.2f, want %.2f/%.2f", got[0], got[1], tc.alloc100, tc.alloc130)
			}
			var bins []float64
			for a := range earlyBins {
				bins = append(bins, c.At(a))
			}
			if diff := cmp.Diff(earlyBins, bins); diff != "" {
				t.Errorf("allocation at arrival 0..12%% (-want +got):\n%s", diff)
			}
		})
	}
}

// TestArrangeTarget checks both inflation paths: the default list grows
// to just under 130% of capacity, multigpu50 (above it) shrinks.
func TestArrangeTarget(t *testing.T) {
	for _, name := range []string{"default", "multigpu50"} {
		t.Run(name, func(t *testing.T) {
			tr := loadTrace(t, name)
			target := tr.Capacity() * 13 / 10
			if target != 8075600 {
				t.Fatalf("target = %d milli, want 8075600 (1.3 x 6212 GPUs)", target)
			}
			a := Arrange(tr, 42)
			var tot int64
			for i := range a.Pods {
				tot += a.Pods[i].GPUMilli()
			}
			if tot > target || tot < target-8*MilliPerGPU {
				t.Errorf("arrivals ask for %d milli, want at most %d and within 8 GPUs of it", tot, target)
			}
			if len(a.Rank) != len(tr.Nodes) || len(tr.Nodes) != 1213 {
				t.Errorf("%d ranks for %d nodes, want 1213", len(a.Rank), len(tr.Nodes))
			}
		})
	}
}
