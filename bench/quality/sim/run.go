package sim

import (
	"fmt"
	"math"
)

// Policy places arriving pods. A Policy is created for one run and used
// by one goroutine.
type Policy interface {
	// Place returns the node (index in name order) and the cards for the
	// pod, or ok false when no node fits. It must not change c; the
	// simulator applies the decision.
	Place(c *Cluster, p *Pod) (node int, gpus []int, ok bool, err error)
}

// Env is what a policy may know when it is created: the trace (the
// reference FGD reads the original pod list as its target workload, as
// the paper does) and the run's seed.
type Env struct {
	Trace *Trace
	Seed  int64
}

// Factory creates a policy for one run.
type Factory func(env Env) (Policy, error)

// Run simulates one seed: the arrivals of Arrange, each placed by a new
// policy from f, and the allocation after every arrival.
func Run(t *Trace, f Factory, seed int64) (Curve, error) {
	gpus := t.Capacity() / MilliPerGPU
	var curve Curve
	var arrived int64
	_, err := run(t, f, seed, func(c *Cluster, p *Pod, _ Placement) {
		arrived += p.GPUMilli()
		curve = append(curve, NewEvent(arrived, c.Used, gpus))
	})
	return curve, err
}

// Placement is one arrival's outcome: the node (index in name order) and
// its cards, or OK false when the pod fit nowhere.
type Placement struct {
	Node  int
	Cards []int
	OK    bool
}

// Placements runs one seed and returns the arrivals and where each went.
func Placements(t *Trace, f Factory, seed int64) (*Arrivals, []Placement, error) {
	var out []Placement
	arr, err := run(t, f, seed, func(_ *Cluster, _ *Pod, pl Placement) { out = append(out, pl) })
	return arr, out, err
}

// run places the arrivals of one seed, calling each after every arrival
// with the cluster after it.
func run(t *Trace, f Factory, seed int64, each func(*Cluster, *Pod, Placement)) (*Arrivals, error) {
	arr := Arrange(t, seed)
	c := NewCluster(t, arr.Rank)
	pol, err := f(Env{Trace: t, Seed: seed})
	if err != nil {
		return nil, fmt.Errorf("create policy: %w", err)
	}
	for i := range arr.Pods {
		p := &arr.Pods[i]
		n, cards, ok, err := pol.Place(c, p)
		if err != nil {
			return nil, fmt.Errorf("seed %d arrival %d: %w", seed, i, err)
		}
		if ok {
			if err := c.Place(n, cards, p); err != nil {
				return nil, fmt.Errorf("seed %d arrival %d: %w", seed, i, err)
			}
		}
		each(c, p, Placement{Node: n, Cards: cards, OK: ok})
	}
	return arr, nil
}

// Result is a policy's allocation at 100% and 130% arrival, averaged over
// seeds.
type Result struct {
	Trace, Policy string
	Seeds         []int64
	// Alloc100 and Alloc130 are the mean allocation percentages.
	Alloc100, Alloc130 float64
	// SeedAlloc100 and SeedAlloc130 are each seed's allocation
	// percentages, in the order of Seeds (the spread, quality/stats.go).
	SeedAlloc100, SeedAlloc130 []float64
	// Curve is the mean allocation at every arrival percentage 0..130.
	Curve []float64
}

// Unalloc130 is the unallocated GPU percentage at 130% arrival.
func (r *Result) Unalloc130() float64 { return 100 - r.Alloc130 }

// MaxArrival is the last arrival percentage of the experiment.
const MaxArrival = 130

// Evaluate runs every seed and averages the per-seed values.
func Evaluate(t *Trace, policy string, f Factory, seeds []int64) (*Result, error) {
	r := &Result{Trace: t.Name, Policy: policy, Seeds: seeds, Curve: make([]float64, MaxArrival+1)}
	for _, seed := range seeds {
		curve, err := Run(t, f, seed)
		if err != nil {
			return nil, fmt.Errorf("trace %s policy %s: %w", t.Name, policy, err)
		}
		for a := range r.Curve {
			if v := curve.At(a); !math.IsNaN(v) {
				r.Curve[a] += v / float64(len(seeds))
			}
		}
		a100, a130 := curve.At(100), curve.At(MaxArrival)
		r.SeedAlloc100 = append(r.SeedAlloc100, a100)
		r.SeedAlloc130 = append(r.SeedAlloc130, a130)
		r.Alloc100 += a100 / float64(len(seeds))
		r.Alloc130 += a130 / float64(len(seeds))
	}
	return r, nil
}

// SeedUnalloc130 returns each seed's unallocated GPU % at 130% arrival.
func (r *Result) SeedUnalloc130() []float64 {
	out := make([]float64, len(r.SeedAlloc130))
	for i, a := range r.SeedAlloc130 {
		out[i] = 100 - a
	}
	return out
}
