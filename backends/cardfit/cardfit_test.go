package cardfit

import (
	"testing"

	"github.com/vgpushare/vshare/device"
)

func TestExcluded(t *testing.T) {
	for _, tc := range []struct {
		name, use, noUse, id string
		want                 bool
	}{
		{name: "no selectors", id: "GPU-a"},
		{name: "in the use list", use: "GPU-b, GPU-a", id: "GPU-a"},
		{name: "not in the use list", use: "GPU-b", id: "GPU-a", want: true},
		{name: "prefix is not a match", use: "GPU-a1", id: "GPU-a", want: true},
		{name: "in the no-use list", noUse: " GPU-a ,GPU-c", id: "GPU-a", want: true},
		{name: "not in the no-use list", noUse: "GPU-c", id: "GPU-a"},
		{name: "both lists name it", use: "GPU-a", noUse: "GPU-a", id: "GPU-a", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Excluded(tc.use, tc.noUse, tc.id); got != tc.want {
				t.Errorf("Excluded(%q, %q, %q) = %v, want %v", tc.use, tc.noUse, tc.id, got, tc.want)
			}
		})
	}
}

func TestTypeExcluded(t *testing.T) {
	const a100 = "NVIDIA-A100-SXM4-80GB"
	for _, tc := range []struct {
		name, use, noUse string
		want             bool
	}{
		{name: "no selectors"},
		{name: "substring in the use list", use: "V100,A100"},
		{name: "not in the use list", use: "V100", want: true},
		{name: "empty entries match nothing", use: " , ", want: true},
		{name: "substring in the no-use list", noUse: "SXM4", want: true},
		{name: "not in the no-use list", noUse: "H100"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := TypeExcluded(tc.use, tc.noUse, a100); got != tc.want {
				t.Errorf("TypeExcluded(%q, %q, %q) = %v, want %v", tc.use, tc.noUse, a100, got, tc.want)
			}
		})
	}
}

func TestNodeScore(t *testing.T) {
	before, after := []float64{0, 0.5}, []float64{0.25, 0.75}
	fullness := func(i int) (float64, float64) { return before[i], after[i] }
	for _, tc := range []struct {
		name, policy string
		n            int
		want         float64
	}{
		{name: "binpack: mean after", policy: device.PolicyBinpack, n: 2, want: 50},
		{name: "spread: one minus mean before", policy: device.PolicySpread, n: 2, want: 75},
		{name: "other policies score as binpack", policy: device.PolicyFragment, n: 2, want: 50},
		{name: "no cards", policy: device.PolicySpread, n: 0, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := NodeScore(tc.policy, tc.n, fullness); got != tc.want {
				t.Errorf("NodeScore = %v, want %v", got, tc.want)
			}
		})
	}
}
