package sim

import (
	"math"
	"testing"
)

func TestRound2(t *testing.T) {
	tests := []struct {
		name string
		in   float64
		want float64
	}{
		{name: "down", in: 93.134, want: 93.13},
		{name: "up", in: 93.136, want: 93.14},
		// 0.125 is exact in binary: a true tie, to even.
		{name: "tie to even down", in: 0.125, want: 0.12},
		{name: "tie to even up", in: 0.375, want: 0.38},
		// 2.675 is stored below the tie, so it goes down as in Python.
		{name: "binary below tie", in: 2.675, want: 2.67},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := round2(tc.in); got != tc.want {
				t.Errorf("round2(%v) = %v, want %v", tc.in, got, tc.want)
			}
		})
	}
}

func TestCurveAt(t *testing.T) {
	c := Curve{{Arrived: 0, Alloc: 0.1}, {Arrived: 0, Alloc: 0.2}, {Arrived: 1, Alloc: 1}, {Arrived: 3, Alloc: 3}}
	tests := []struct {
		name string
		a    int
		want float64
	}{
		{name: "mean of the bin", a: 0, want: 0.15},
		{name: "single event", a: 1, want: 1},
		{name: "empty bin uses neighbours", a: 2, want: 2},
		{name: "nothing near", a: 10, want: math.NaN()},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := c.At(tc.a)
			if got != tc.want && !(math.IsNaN(got) && math.IsNaN(tc.want)) {
				t.Errorf("At(%d) = %v, want %v", tc.a, got, tc.want)
			}
		})
	}
}

func TestNewEventBins(t *testing.T) {
	// 6212 cards: 31060 milli is exactly 0.5% of capacity, which rounds
	// half to even (to 0); 93180 milli is 1.5%, which rounds to 2.
	tests := []struct {
		arrived int64
		want    int
	}{{31060, 0}, {93180, 2}, {62120, 1}}
	for _, tc := range tests {
		if got := NewEvent(tc.arrived, 0, 6212).Arrived; got != tc.want {
			t.Errorf("NewEvent(%d).Arrived = %d, want %d", tc.arrived, got, tc.want)
		}
	}
}
