package quality

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// Bound is an upper bound on the allocation any online policy can reach,
// in Curve.At's units: allocated GPU % of capacity at 100% and 130%
// arrival, comparable with Result.Alloc100 and Result.Alloc130.
type Bound struct {
	Alloc100, Alloc130 float64
}

// UpperBound bounds, for one seed, what any policy could allocate on the
// arrivals of Arrange(t, seed) at 100% and 130% arrival.
//
// Why it is an upper bound. Pods never leave and a failed pod is not
// retried, so after any arrival a policy's placed pods are a feasible
// packing of a subset of the pods arrived so far (online or not, whatever
// it knew). Curve.At(a) is the mean of the allocations over the events of
// bin a (or of bins a-1..a+1 when a is empty); each of these events comes
// at or before the last event e of that range, so each allocation is at
// most OPT(pods up to e), the best packing of e's prefix, and at most the
// GPU milli arrived by that event. UpperBound replays Curve.At on a curve
// whose allocation at every event i up to e is min(arrived_i, U), U >= OPT
// of e's prefix, with the same rounding as newEvent and At; both rounding
// and the mean are monotone, so the result is >= any policy's At(a).
//
// U is packBound, the value of a linear relaxation of the offline packing
// (see packBound for its rows). Assumptions: the node list and the pod
// shapes are exactly the simulator's (Cluster.Feasible: CPU, memory, model
// in gpu_spec, num_gpu cards with gpu_milli free each); nothing else
// limits a placement.
func UpperBound(t *Trace, seed int64) (Bound, error) {
	if len(t.Nodes) == 0 {
		return Bound{}, fmt.Errorf("trace %s: no GPU nodes", t.Name)
	}
	arr := Arrange(t, seed)
	gpus := t.Capacity() / MilliPerGPU
	arrived := make([]int64, len(arr.Pods))
	bins := make(Curve, len(arr.Pods))
	var tot int64
	for i := range arr.Pods {
		tot += arr.Pods[i].GPUMilli()
		arrived[i] = tot
		bins[i] = newEvent(tot, 0, gpus)
	}
	at := func(a int) (float64, error) {
		last := lastEventFor(bins, a)
		if last < 0 {
			return 0, fmt.Errorf("trace %s seed %d: arrivals never reach %d%% of capacity", t.Name, seed, a)
		}
		u, err := packBound(t.Nodes, arr.Pods[:last+1])
		if err != nil {
			return 0, fmt.Errorf("trace %s seed %d at %d%%: %w", t.Name, seed, a, err)
		}
		c := make(Curve, last+1)
		for i := range c {
			c[i] = newEvent(arrived[i], min(arrived[i], u), gpus)
		}
		return c.At(a), nil
	}
	var b Bound
	var err error
	if b.Alloc100, err = at(100); err != nil {
		return Bound{}, err
	}
	if b.Alloc130, err = at(MaxArrival); err != nil {
		return Bound{}, err
	}
	return b, nil
}

// MeanBound is UpperBound averaged over the seeds the way Evaluate averages
// a policy's values, so that it bounds Evaluate's Alloc100 and Alloc130.
func MeanBound(t *Trace, seeds []int64) (Bound, error) {
	if len(seeds) == 0 {
		return Bound{}, fmt.Errorf("trace %s: no seeds for the bound", t.Name)
	}
	var m Bound
	for _, seed := range seeds {
		b, err := UpperBound(t, seed)
		if err != nil {
			return Bound{}, err
		}
		m.Alloc100 += b.Alloc100 / float64(len(seeds))
		m.Alloc130 += b.Alloc130 / float64(len(seeds))
	}
	return m, nil
}

// lastEventFor is the index of the last event Curve.At(a) averages over:
// the last of bin a, or, when bin a is empty, the last of bins a-1..a+1;
// -1 when At(a) is NaN. Arrived never decreases along a curve.
func lastEventFor(c Curve, a int) int {
	last := -1
	for i, e := range c {
		if e.Arrived == a {
			last = i
		}
	}
	if last >= 0 {
		return last
	}
	for i, e := range c {
		if e.Arrived >= a-1 && e.Arrived <= a+1 {
			last = i
		}
	}
	return last
}

// maxCutsPerResource caps the dual-feasible-function rows per node type
// and resource (see packBound).
var maxCutsPerResource = 6

// packBound returns an upper bound, in GPU milli, on the GPU any feasible
// placement of any subset of pods on nodes can allocate: the weak-duality
// value of a linear relaxation of the packing. Pods without GPUs, or
// asking for none, are left out (refusing them loses no GPU, so the
// relaxation may). Nodes are grouped by type (model, cards, CPU, memory)
// and pods by shape (CPU, memory, cards, milli, gpu_spec); variable
// x[s,τ] is how many pods of shape s go to nodes of type τ, fractions
// allowed, and exists only where one such pod fits an empty node of the
// type (cards, CPU, memory, model in gpu_spec). Rows, per type τ with N
// nodes of G cards, C CPU and M memory:
//
//   - supply: Σ_τ x[s,τ] <= pods of shape s arrived;
//   - GPU: Σ cards·milli x <= 1000·G·N; CPU: Σ cpu x <= C·N; memory alike;
//   - cuts from dual-feasible functions (Fekete and Schepers' u^ε): for an
//     integer e with 2e <= Cap, f(v) = Cap if v > Cap-e, 0 if v < e, else
//     v; the items of one bin summing to at most Cap have f summing to at
//     most Cap (at most one item exceeds Cap-e >= Cap/2, and beside it
//     only items below e fit). Applied to each card (items: every pod's
//     per-card milli, Cap 1000, Σ over the type's G·N cards) and to each
//     node's card total (items cards·milli, Cap 1000·G, when G > 1), CPU
//     and memory (Cap C or M, Σ over N nodes). They say, for example, that
//     a card holds one pod above 500 milli and a node one pod above half
//     its CPU, which the plain sums allow fractionally. e is chosen so that
//     each large item size of the type in turn counts as a full bin (at
//     most maxCutsPerResource sizes, spread over their range).
//
// Grouping identical nodes loses nothing for a fractional relaxation (a
// solution can be averaged over the nodes of a type); what the relaxation
// gives up is integrality (pods split across nodes and cards beyond what
// the cuts catch) and the interaction of resources within one node (CPU,
// memory and cards are summed separately). The value is a dual bound:
// whatever the simplex returns is made dual-feasible (dualBound), so the
// result is sound even when the simplex stops early or rounds; it is
// rounded up to whole milli and capped by the pods' total GPU.
func packBound(nodes []Node, pods []Pod) (int64, error) {
	type nodeType struct {
		Node
		count int
	}
	var types []nodeType
	typeIdx := map[[4]string]int{}
	var capacity int64
	for _, n := range nodes {
		if n.GPUs <= 0 {
			continue
		}
		capacity += int64(n.GPUs) * MilliPerGPU
		k := [4]string{n.Model, fmt.Sprint(n.GPUs), fmt.Sprint(n.CPU), fmt.Sprint(n.Memory)}
		i, ok := typeIdx[k]
		if !ok {
			i = len(types)
			typeIdx[k] = i
			types = append(types, nodeType{Node: n})
		}
		types[i].count++
	}
	type shape struct {
		pod   Pod
		count int
	}
	var shapes []shape
	shapeIdx := map[string]int{}
	var arrived int64
	for i := range pods {
		p := &pods[i]
		if p.NumGPU < 0 || p.Milli < 0 || p.Milli > MilliPerGPU {
			return 0, fmt.Errorf("pod %s: num_gpu %d, gpu_milli %d: want num_gpu >= 0 and gpu_milli in [0, %d]", p.Name, p.NumGPU, p.Milli, MilliPerGPU)
		}
		if p.GPUMilli() == 0 {
			continue
		}
		arrived += p.GPUMilli()
		k := fmt.Sprintf("%d/%d/%d/%d/%s", p.CPU, p.Memory, p.NumGPU, p.Milli, strings.Join(p.Spec, "|"))
		i, ok := shapeIdx[k]
		if !ok {
			i = len(shapes)
			shapeIdx[k] = i
			shapes = append(shapes, shape{pod: *p})
		}
		shapes[i].count++
	}
	if arrived == 0 || capacity == 0 {
		return 0, nil
	}

	lp := &packLP{}
	supply := make([]int, len(shapes))
	for s := range shapes {
		supply[s] = lp.addRow(float64(shapes[s].count))
	}
	// fits[s][τ]: one pod of shape s fits an empty node of type τ.
	fits := make([][]bool, len(shapes))
	for s := range shapes {
		p := &shapes[s].pod
		fits[s] = make([]bool, len(types))
		for t, nt := range types {
			fits[s][t] = p.NumGPU <= nt.GPUs && p.CPU <= nt.CPU && p.Memory <= nt.Memory && p.Accepts(nt.Model)
		}
	}
	// A resource row of a type: coefficient of each shape and right-hand
	// side, both already divided by the bin capacity.
	type rowSpec struct {
		coef func(p *Pod) float64
		rhs  float64
	}
	colRows := make([][]int, len(shapes)*len(types))
	colVals := make([][]float64, len(shapes)*len(types))
	for t, nt := range types {
		N := float64(nt.count)
		cards := float64(nt.GPUs) * N
		var specs []rowSpec
		perCard := func(p *Pod) int64 { return p.Milli }
		perNodeGPU := func(p *Pod) int64 { return p.GPUMilli() }
		perCPU := func(p *Pod) int64 { return p.CPU }
		perMem := func(p *Pod) int64 { return p.Memory }
		// Plain sums.
		specs = append(specs,
			rowSpec{func(p *Pod) float64 { return float64(p.GPUMilli()) / MilliPerGPU }, cards},
			rowSpec{func(p *Pod) float64 { return ratio(p.CPU, nt.CPU) }, N},
			rowSpec{func(p *Pod) float64 { return ratio(p.Memory, nt.Memory) }, N},
		)
		// Dual-feasible-function cuts.
		sizes := func(item func(p *Pod) int64) []int64 {
			var out []int64
			for s := range shapes {
				if fits[s][t] {
					out = append(out, item(&shapes[s].pod))
				}
			}
			return out
		}
		for _, e := range dffEpsilons(sizes(perCard), MilliPerGPU, 'c') {
			specs = append(specs, rowSpec{func(p *Pod) float64 {
				return float64(p.NumGPU) * float64(dff(p.Milli, MilliPerGPU, e)) / MilliPerGPU
			}, cards})
		}
		if nt.GPUs > 1 {
			capG := int64(nt.GPUs) * MilliPerGPU
			for _, e := range dffEpsilons(sizes(perNodeGPU), capG, 'g') {
				specs = append(specs, rowSpec{func(p *Pod) float64 {
					return ratio(dff(p.GPUMilli(), capG, e), capG)
				}, N})
			}
		}
		for _, e := range dffEpsilons(sizes(perCPU), nt.CPU, 'p') {
			specs = append(specs, rowSpec{func(p *Pod) float64 { return ratio(dff(p.CPU, nt.CPU, e), nt.CPU) }, N})
		}
		for _, e := range dffEpsilons(sizes(perMem), nt.Memory, 'm') {
			specs = append(specs, rowSpec{func(p *Pod) float64 { return ratio(dff(p.Memory, nt.Memory, e), nt.Memory) }, N})
		}
		for _, rs := range specs {
			r := lp.addRow(rs.rhs)
			for s := range shapes {
				if !fits[s][t] {
					continue
				}
				if v := rs.coef(&shapes[s].pod); v != 0 {
					j := s*len(types) + t
					colRows[j] = append(colRows[j], r)
					colVals[j] = append(colVals[j], v)
				}
			}
		}
	}
	for s := range shapes {
		for t := range types {
			if !fits[s][t] {
				continue
			}
			j := s*len(types) + t
			lp.cols = append(lp.cols, lpCol{
				c:      float64(shapes[s].pod.GPUMilli()) / MilliPerGPU,
				supply: supply[s],
				rows:   colRows[j],
				vals:   colVals[j],
			})
		}
	}
	if len(lp.cols) == 0 {
		return 0, nil
	}
	ub := lp.dualBound(lp.solveDual())
	if debugBound != nil {
		debugBound(len(lp.b), len(lp.cols), lpDebugIt, lpDebugPrimal, ub)
	}
	// Whole milli, rounded up with a margin far above float64's error on
	// sums of this size.
	milli := math.Ceil(ub*MilliPerGPU*(1+1e-9) + 1e-6)
	return min(int64(milli), arrived, capacity), nil
}

// ratio is v/capacity, 0 for an empty item (capacity > 0 for any item that
// fits).
func ratio(v, capacity int64) float64 {
	if v == 0 {
		return 0
	}
	return float64(v) / float64(capacity)
}

// dff is Fekete and Schepers' dual-feasible function u^ε in integer units
// (e = ε·capacity, 2e <= capacity): a large item counts as the whole bin,
// a small one as nothing.
func dff(v, capacity, e int64) int64 {
	switch {
	case v > capacity-e:
		return capacity
	case v < e:
		return 0
	}
	return v
}

// dffEpsilons picks the e of the cuts for items of the given sizes in a bin
// of capacity: for each size v above half the bin, e = capacity - v + 1
// makes v count as a full bin; at most maxCutsPerResource of them, spread
// over the sorted candidates.
func dffEpsilons(sizes []int64, capacity int64, kind byte) []int64 {
	if strings.IndexByte(debugKinds, kind) < 0 {
		return nil
	}
	seen := map[int64]bool{}
	var cand []int64
	for _, v := range sizes {
		e := capacity - v + 1
		if v >= capacity || 2*e > capacity || e <= 0 || seen[e] {
			continue
		}
		seen[e] = true
		cand = append(cand, e)
	}
	sort.Slice(cand, func(i, j int) bool { return cand[i] < cand[j] })
	if len(cand) <= maxCutsPerResource {
		return cand
	}
	if maxCutsPerResource < 2 {
		return cand[:maxCutsPerResource]
	}
	out := make([]int64, 0, maxCutsPerResource)
	for k := range maxCutsPerResource {
		out = append(out, cand[k*(len(cand)-1)/(maxCutsPerResource-1)])
	}
	return out
}

var debugBound func(rows, cols, its int, primal, dual float64)

var debugKinds = "cgpm"
