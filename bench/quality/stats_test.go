package quality

import (
	"math"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestSpreadHandComputed(t *testing.T) {
	for _, tc := range []struct {
		name         string
		xs           []float64
		mean, sd, ci float64
	}{
		// mean 2.5; squares 2.25+0.25+0.25+2.25 = 5, sd = sqrt(5/3);
		// ci = t(0.975, 3) sd / sqrt(4) = 3.182 * 1.290994 / 2.
		{"four", []float64{1, 2, 3, 4}, 2.5, 1.290994, 2.053972},
		// mean 5, squares 32, sd = sqrt(32/7); ci = 2.365 * sd / sqrt(8).
		{"eight", []float64{2, 4, 4, 4, 5, 5, 7, 9}, 5, 2.138090, 1.787772},
		// Ten seeds: sd = sqrt(sum((i-4.5)^2)/9) = sqrt(82.5/9); ci = 2.262 * sd / sqrt(10).
		{"ten", []float64{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, 4.5, 3.027650, 2.165700},
		{"constant", []float64{4.61, 4.61, 4.61}, 4.61, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := SpreadOf(tc.xs)
			if s.N != len(tc.xs) || !near(s.Mean, tc.mean, 1e-9) || !near(s.SD, tc.sd, 1e-6) || !near(s.CI, tc.ci, 1e-6) {
				t.Errorf("SpreadOf(%v) = %+v, want mean %v sd %v ci %v", tc.xs, s, tc.mean, tc.sd, tc.ci)
			}
		})
	}
}

func TestSpreadOfFewValues(t *testing.T) {
	if s := SpreadOf(nil); !math.IsNaN(s.Mean) || !math.IsNaN(s.SD) || !math.IsNaN(s.CI) {
		t.Errorf("SpreadOf(nil) = %+v, want NaN everywhere", s)
	}
	s := SpreadOf([]float64{95.29})
	if s.Mean != 95.29 || !math.IsNaN(s.SD) || !math.IsNaN(s.CI) || s.Excludes0() {
		t.Errorf("SpreadOf(one) = %+v, want the value, NaN spread, and no claim that it excludes 0", s)
	}
}

func TestT975(t *testing.T) {
	for _, tc := range []struct {
		df   int
		want float64
	}{
		{1, 12.706}, {2, 4.303}, {9, 2.262}, {10, 2.228}, {30, 2.042},
		// Beyond the table: exact quantiles 2.0395, 2.0211, 1.9840, 1.9623.
		{31, 2.0395}, {40, 2.0211}, {100, 1.9840}, {1000, 1.9623},
	} {
		if got := T975(tc.df); !near(got, tc.want, 0.0006) {
			t.Errorf("T975(%d) = %.4f, want %.4f", tc.df, got, tc.want)
		}
	}
	if !math.IsNaN(T975(0)) {
		t.Errorf("T975(0) = %v, want NaN", T975(0))
	}
}

func TestPairedBySeed(t *testing.T) {
	a := &Result{Seeds: []int64{42, 43, 44}, SeedAlloc130: []float64{95, 96, 97}}
	b := &Result{Seeds: []int64{44, 43, 45}, SeedAlloc130: []float64{96.5, 95, 90}}
	// Only 43 and 44 are common; unallocated a - b = (4-5), (3-3.5).
	got := Paired(a, b, SeedUnalloc130Of)
	if len(got) != 2 || !near(got[0], -1, 1e-9) || !near(got[1], -0.5, 1e-9) {
		t.Errorf("Paired = %v, want [-1 -0.5] (seeds 43 and 44, a minus b)", got)
	}
}

func TestExcludes0(t *testing.T) {
	for _, tc := range []struct {
		s    Spread
		want bool
	}{
		{Spread{Mean: -0.3, CI: 0.1}, true},
		{Spread{Mean: 0.3, CI: 0.1}, true},
		{Spread{Mean: -0.1, CI: 0.1}, false},
		{Spread{Mean: -0.02, CI: 0.05}, false},
		{Spread{Mean: -1, CI: math.NaN()}, false},
	} {
		if got := tc.s.Excludes0(); got != tc.want {
			t.Errorf("%+v.Excludes0() = %v, want %v", tc.s, got, tc.want)
		}
	}
}
