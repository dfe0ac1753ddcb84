package sim

import (
	"math"
	"strconv"
)

// Event is the cluster after one arrival.
type Event struct {
	// Arrived is the percentage of capacity requested so far (failures
	// included), rounded half to even.
	Arrived int
	// Alloc is the allocated percentage of capacity, rounded to 2 places.
	Alloc float64
}

// Curve is one run's events, one per arrival.
type Curve []Event

// NewEvent records the cluster of gpus cards after an arrival. The
// divisions are in the original's order (milli / cards / 10), which decides
// the rounding at bin edges.
func NewEvent(arrived, used, gpus int64) Event {
	return Event{
		Arrived: int(math.RoundToEven(float64(arrived) / float64(gpus) / 10)),
		Alloc:   round2(float64(used) / float64(gpus) / 10),
	}
}

// round2 rounds to two decimals as Python's round(x, 2) does: the exact
// binary value, half to even (strconv rounds the exact decimal expansion).
func round2(x float64) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(x, 'f', 2, 64), 64)
	return v
}

// At is the allocation at arrival percentage a: the mean of the events
// whose Arrived is a, or within a±1 when there are none; NaN when the
// curve never comes near a.
func (c Curve) At(a int) float64 {
	if v, ok := c.mean(a, a); ok {
		return v
	}
	if v, ok := c.mean(a-1, a+1); ok {
		return v
	}
	return math.NaN()
}

func (c Curve) mean(lo, hi int) (float64, bool) {
	var sum float64
	n := 0
	for _, e := range c {
		if e.Arrived >= lo && e.Arrived <= hi {
			sum += e.Alloc
			n++
		}
	}
	if n == 0 {
		return 0, false
	}
	return round2(sum / float64(n)), true
}
