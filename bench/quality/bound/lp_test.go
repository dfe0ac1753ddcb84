package bound

import (
	"math"
	"testing"
)

// TestDualBoundAnyPrices checks that dualBound stays an upper bound for
// prices a failed simplex could leave (zero, negative, NaN, huge): on a
// tiny program whose optimum is known.
func TestDualBoundAnyPrices(t *testing.T) {
	// max x0 + 2 x1: x0 <= 3 (supply 0), x1 <= 1 (supply 1), x0 + x1 <= 2.
	p := &packLP{}
	s0, s1, r := p.addRow(3), p.addRow(1), p.addRow(2)
	p.cols = []lpCol{{c: 1, supply: s0, rows: []int{r}, vals: []float64{1}}, {c: 2, supply: s1, rows: []int{r}, vals: []float64{1}}}
	const opt = 3.0
	if got := p.dualBound(p.solveDual()); math.Abs(got-opt) > 1e-9 {
		t.Errorf("bound at the simplex's prices = %v, want the optimum %v", got, opt)
	}
	for _, y := range [][]float64{{0, 0, 0}, {-1, -1, -1}, {math.NaN(), 0, math.NaN()}, {0, 0, 1e9}, {5, 5, 0.5}} {
		if got := p.dualBound(y); !(got >= opt-1e-9) {
			t.Errorf("bound at prices %v = %v, want at least the optimum %v", y, got, opt)
		}
	}
}
