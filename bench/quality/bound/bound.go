package bound

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/vgpushare/vshare/bench/quality/sim"
)

// Bound is an upper bound on the allocation any policy can reach,
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
// bin a (or of bins a-1..a+1 when a is empty); each event i's allocation
// is at most OPT(i), the best packing of the pods up to i, which only
// grows with i, and at most the GPU milli arrived by i. UpperBound replays
// Curve.At on a curve whose allocation at every event i of the range is
// min(arrived_i, U), U >= OPT(k) for a checkpoint k >= i (the range's last
// event and, when its bound is below what arrived, binCheckpoints-1
// events spread over the range), with the same rounding as NewEvent and
// At; both rounding and the mean are monotone, so the result is >= any
// policy's At(a).
//
// U is packBound, the value of a linear relaxation of the offline packing
// (see packBound for its rows). Assumptions: the node list and the pod
// shapes are exactly the simulator's (Cluster.Feasible: CPU, memory, model
// in gpu_spec, num_gpu cards with gpu_milli free each); nothing else
// limits a placement.
func UpperBound(t *sim.Trace, seed int64) (Bound, error) {
	if len(t.Nodes) == 0 {
		return Bound{}, fmt.Errorf("trace %s: no GPU nodes", t.Name)
	}
	b, err := boundArrivals(t, sim.Arrange(t, seed).Pods)
	if err != nil {
		return Bound{}, fmt.Errorf("trace %s seed %d: %w", t.Name, seed, err)
	}
	return b, nil
}

// boundArrivals is UpperBound for the pods in arrival order.
func boundArrivals(t *sim.Trace, pods []sim.Pod) (Bound, error) {
	gpus := t.Capacity() / sim.MilliPerGPU
	bins, arrived := arrivalCurve(t, pods)
	capacity := t.Capacity()
	at := func(a int) (float64, error) {
		first, last := eventsFor(bins, a)
		if last < 0 {
			return 0, fmt.Errorf("arrivals never come within 1 of %d%% of capacity", a)
		}
		// u[i] bounds the best packing of the first i+1 pods for every
		// event i of the range: the bound of the last event's prefix and,
		// when that is below what arrived, of binCheckpoints-1 shorter
		// prefixes ending inside the range, each for the events up to
		// its end.
		uLast, err := packBound(t.Nodes, pods[:last+1])
		if err != nil {
			return 0, fmt.Errorf("at %d%%: %w", a, err)
		}
		u := make([]int64, last+1)
		for i := range u {
			u[i] = uLast
		}
		if uLast < min(arrived[last], capacity) {
			prev := last
			for j := binCheckpoints - 1; j >= 1; j-- {
				k := first + (last+1-first)*j/binCheckpoints - 1
				if k < first || k >= prev {
					continue
				}
				v, err := packBound(t.Nodes, pods[:k+1])
				if err != nil {
					return 0, fmt.Errorf("at %d%%: %w", a, err)
				}
				for i := first; i <= k; i++ {
					u[i] = min(u[i], v)
				}
				prev = k
			}
		}
		c := make(sim.Curve, last+1)
		for i := range c {
			c[i] = sim.NewEvent(arrived[i], min(arrived[i], u[i]), gpus)
		}
		return c.At(a), nil
	}
	var b Bound
	var err error
	if b.Alloc100, err = at(100); err != nil {
		return Bound{}, err
	}
	if b.Alloc130, err = at(sim.MaxArrival); err != nil {
		return Bound{}, err
	}
	return b, nil
}

// arrivalCurve is the curve of the pods' arrivals with nothing placed
// (only Event.Arrived matters), on which eventsFor finds the events
// Curve.At averages over, and the GPU milli arrived after each pod.
func arrivalCurve(t *sim.Trace, pods []sim.Pod) (sim.Curve, []int64) {
	gpus := t.Capacity() / sim.MilliPerGPU
	arrived := make([]int64, len(pods))
	bins := make(sim.Curve, len(pods))
	var tot int64
	for i := range pods {
		tot += pods[i].GPUMilli()
		arrived[i] = tot
		bins[i] = sim.NewEvent(tot, 0, gpus)
	}
	return bins, arrived
}

// MeanBound is UpperBound averaged over the seeds the way sim.Evaluate averages
// a policy's values, so that it bounds Evaluate's Alloc100 and Alloc130.
func MeanBound(t *sim.Trace, seeds []int64) (Bound, error) {
	return meanOverSeeds(t, seeds, "the bound", UpperBound)
}

// meanOverSeeds averages of(t, seed) over the seeds as Evaluate averages a
// policy's values; what names the value in the error for no seeds.
func meanOverSeeds(t *sim.Trace, seeds []int64, what string, of func(*sim.Trace, int64) (Bound, error)) (Bound, error) {
	if len(seeds) == 0 {
		return Bound{}, fmt.Errorf("trace %s: no seeds for %s", t.Name, what)
	}
	var m Bound
	for _, seed := range seeds {
		b, err := of(t, seed)
		if err != nil {
			return Bound{}, err
		}
		m.Alloc100 += b.Alloc100 / float64(len(seeds))
		m.Alloc130 += b.Alloc130 / float64(len(seeds))
	}
	return m, nil
}

// eventsFor is the first and last index of the events Curve.At(a)
// averages over: those of bin a, or, when bin a is empty, those of bins
// a-1..a+1; -1, -1 when At(a) is NaN. Arrived never decreases along a
// curve, so they are contiguous.
func eventsFor(c sim.Curve, a int) (first, last int) {
	for _, r := range [][2]int{{a, a}, {a - 1, a + 1}} {
		first, last = -1, -1
		for i, e := range c {
			if e.Arrived >= r[0] && e.Arrived <= r[1] {
				if first < 0 {
					first = i
				}
				last = i
			}
		}
		if last >= 0 {
			return first, last
		}
	}
	return -1, -1
}

// Limits of the relaxation's size, chosen for speed (all 24 traces x 10
// seeds in a few minutes on one core): CPU and memory steps of 16 cores
// and 64 GiB give the same bound as 8 cores and 32 GiB on all 24 traces x
// 10 seeds (and the latter the same as exact shapes on the tuning traces at
// seed 42); more node cuts changed no tuning trace's bound; f^(k) beyond 6
// helps only composed with u^ε of the largest shares (to 10, no further). Shapes are grouped with CPU in
// steps of cpuGrain milli-cores and memory in steps of memGrain MiB (each
// group asking for its smallest member's CPU and memory); at most
// maxCardEpsilons u^ε card cuts per type, maxNodeCuts u^ε node cuts per
// type and resource; f^(k) card cuts, alone and of each u^ε, up to maxFK,
// and of the two u^ε of the largest shares up to maxFKLarge.
const (
	cpuGrain        = 16000
	memGrain        = 65536
	maxCardEpsilons = 6
	maxNodeCuts     = 2
	maxFK           = 6
	maxFKLarge      = 10
	// binCheckpoints is how many prefixes are bounded per arrival bin when
	// the last one's bound is below what arrived.
	binCheckpoints = 4
)

// packBound returns an upper bound, in GPU milli, on the GPU any feasible
// placement of any subset of pods on nodes can allocate: the weak-duality
// value of a linear relaxation of the packing. Pods asking for no GPU are
// left out (refusing them loses no GPU, so the relaxation may). Nodes are
// grouped by type (model, cards, CPU, memory); pods by shape (cards,
// milli, gpu_spec, CPU and memory in steps of cpuGrain and memGrain, each
// shape asking for its smallest member's CPU and memory, which only
// loosens). Variable x[s,τ] is how many pods of shape s go to nodes of
// type τ, fractions allowed; it exists only where one such pod fits an
// empty node of the type (cards, CPU, memory, model in gpu_spec). Rows,
// per type τ with N nodes of G cards, C CPU and M memory:
//
//   - supply: Σ_τ x[s,τ] <= pods of shape s arrived;
//   - GPU: Σ cards·milli x <= 1000·G·N; CPU: Σ cpu x <= C·N; memory alike;
//   - card cuts, Σ cards·f(milli) x <= L·G·N: whatever pods share one card,
//     the sum of f over them is at most L. f is one of Fekete and
//     Schepers' dual-feasible functions u^ε (a pod above 1000-e milli
//     counts as the whole card, one below e as nothing; e makes each large
//     size in turn count as a full card), f^(k) for k = 2..maxFK (v counts
//     floor((k+1)v/1000)/k: with k = 2 two 470-milli pods fill a card) and
//     f^(k) of u^ε (to maxFKLarge for the largest shares); L is not taken from the theory but computed, as the
//     best sum of f over any multiset of the type's sizes fitting 1000
//     milli (an unbounded knapsack), so a wrong f could only loosen;
//   - node cuts, u^ε on a node's card total (items cards·milli, bin
//     1000·G, when G > 1), CPU (bin C) and memory (bin M), Σ f x <= N:
//     for an integer e with 2e <= bin, f(v) = bin if v > bin-e, 0 if
//     v < e, else v; at most one item of a bin exceeds bin-e >= bin/2 and
//     beside it only items below e fit, so f sums to at most the bin.
//
// Grouping identical nodes loses nothing for a fractional relaxation (a
// solution can be averaged over the nodes of a type); what the relaxation
// gives up is integrality beyond what the cuts catch (pods split across
// nodes and cards), the interaction of resources within one node (cards,
// CPU and memory are summed separately), and order: it may refuse any pod
// (say every 810-milli share, whose card keeps 190 milli few pods can
// use), which no policy here does while a node fits the pod. The value is
// a dual bound: the simplex's prices are made dual-feasible (dualBound), so
// the result is sound even when the simplex stops early or rounds; it is
// rounded down to whole milli (after a margin for float rounding; a
// placement allocates whole milli) and capped by the pods' total GPU.
func packBound(nodes []sim.Node, pods []sim.Pod) (int64, error) {
	pp, err := newPackProgram(nodes, pods, cpuGrain, memGrain)
	if err != nil {
		return 0, err
	}
	if pp.lp == nil {
		return 0, nil
	}
	ub := pp.lp.dualBound(pp.lp.solveDual())
	// Any placement allocates whole milli: round down, after a margin far
	// above float64's error on sums of this size.
	milli := math.Floor(ub*sim.MilliPerGPU*(1+1e-9) + 1e-6)
	if math.IsNaN(milli) || milli >= float64(min(pp.arrived, pp.capacity)) {
		return min(pp.arrived, pp.capacity), nil
	}
	return int64(milli), nil
}

// packProgram is packBound's linear relaxation of packing pods on nodes,
// with what it was built from: the node types (and their nodes), the pod
// shapes (and their pods) and which column is which shape on which type.
type packProgram struct {
	lp                *packLP // nil when no column exists (the bound is then 0)
	arrived, capacity int64
	types             []packType
	shapes            []packShape
	// colShape and colType name each column's shape and node type.
	colShape, colType []int
}

// packType is one node type: nodes of the same model, cards, CPU and
// memory.
type packType struct {
	sim.Node
	nodes []int // indices into the node list
}

// packShape is one pod shape: pods of the same cards, milli and gpu_spec
// with CPU and memory in the same grain; pod asks for the smallest
// member's CPU and memory.
type packShape struct {
	pod  sim.Pod
	pods []int // indices into the pod list
}

// newPackProgram builds packBound's program with CPU and memory grouped in
// steps of cpuStep milli-cores and memStep MiB (1 and 1: exact shapes).
func newPackProgram(nodes []sim.Node, pods []sim.Pod, cpuStep, memStep int64) (*packProgram, error) {
	pp := &packProgram{}
	typeIdx := map[string]int{}
	for ni, n := range nodes {
		if n.GPUs <= 0 {
			continue
		}
		pp.capacity += int64(n.GPUs) * sim.MilliPerGPU
		k := fmt.Sprintf("%s/%d/%d/%d", n.Model, n.GPUs, n.CPU, n.Memory)
		i, ok := typeIdx[k]
		if !ok {
			i = len(pp.types)
			typeIdx[k] = i
			pp.types = append(pp.types, packType{Node: n})
		}
		pp.types[i].nodes = append(pp.types[i].nodes, ni)
	}
	types := pp.types
	shapeIdx := map[string]int{}
	for i := range pods {
		p := &pods[i]
		if p.NumGPU < 0 || p.Milli < 0 || p.Milli > sim.MilliPerGPU {
			return pp, fmt.Errorf("pod %s: num_gpu %d, gpu_milli %d: want num_gpu >= 0 and gpu_milli in [0, %d]", p.Name, p.NumGPU, p.Milli, sim.MilliPerGPU)
		}
		if p.GPUMilli() == 0 {
			continue
		}
		pp.arrived += p.GPUMilli()
		k := fmt.Sprintf("%d/%d/%d/%d/%s", p.CPU/cpuStep, p.Memory/memStep, p.NumGPU, p.Milli, strings.Join(p.Spec, "|"))
		j, ok := shapeIdx[k]
		if !ok {
			j = len(pp.shapes)
			shapeIdx[k] = j
			pp.shapes = append(pp.shapes, packShape{pod: *p})
		}
		sh := &pp.shapes[j]
		sh.pods = append(sh.pods, i)
		sh.pod.CPU = min(sh.pod.CPU, p.CPU)
		sh.pod.Memory = min(sh.pod.Memory, p.Memory)
	}
	if pp.arrived == 0 || pp.capacity == 0 {
		return pp, nil
	}
	lp := &packLP{}
	supply := make([]int, len(pp.shapes))
	for s := range pp.shapes {
		supply[s] = lp.addRow(float64(len(pp.shapes[s].pods)))
	}
	// fits[s][τ]: one pod of shape s fits an empty node of type τ.
	fits := make([][]bool, len(pp.shapes))
	for s := range pp.shapes {
		p := &pp.shapes[s].pod
		fits[s] = make([]bool, len(types))
		for t, nt := range types {
			fits[s][t] = p.NumGPU <= nt.GPUs && p.CPU <= nt.CPU && p.Memory <= nt.Memory && p.Accepts(nt.Model)
		}
	}
	// A row of one type: every shape's coefficient and the right-hand
	// side, both divided by the bin's capacity.
	type rowSpec struct {
		coef func(p *sim.Pod) float64
		rhs  float64
	}
	colRows := make([][]int, len(pp.shapes)*len(types))
	colVals := make([][]float64, len(pp.shapes)*len(types))
	for t, nt := range types {
		N := float64(len(nt.nodes))
		cards := float64(nt.GPUs) * N
		sizes := func(item func(p *sim.Pod) int64) []int64 {
			var out []int64
			for s := range pp.shapes {
				if fits[s][t] {
					out = append(out, item(&pp.shapes[s].pod))
				}
			}
			return out
		}
		specs := []rowSpec{
			{func(p *sim.Pod) float64 { return float64(p.GPUMilli()) / sim.MilliPerGPU }, cards},
			{func(p *sim.Pod) float64 { return ratio(p.CPU, nt.CPU) }, N},
			{func(p *sim.Pod) float64 { return ratio(p.Memory, nt.Memory) }, N},
		}
		for _, cut := range cardCuts(sizes(func(p *sim.Pod) int64 { return p.Milli })) {
			specs = append(specs, rowSpec{func(p *sim.Pod) float64 {
				return float64(p.NumGPU) * cut.value[p.Milli]
			}, cards * cut.limit})
		}
		if nt.GPUs > 1 {
			capG := int64(nt.GPUs) * sim.MilliPerGPU
			for _, e := range dffEpsilons(sizes((*sim.Pod).GPUMilli), capG, maxNodeCuts) {
				specs = append(specs, rowSpec{func(p *sim.Pod) float64 { return ratio(dff(p.GPUMilli(), capG, e), capG) }, N})
			}
		}
		for _, e := range dffEpsilons(sizes(func(p *sim.Pod) int64 { return p.CPU }), nt.CPU, maxNodeCuts) {
			specs = append(specs, rowSpec{func(p *sim.Pod) float64 { return ratio(dff(p.CPU, nt.CPU, e), nt.CPU) }, N})
		}
		for _, e := range dffEpsilons(sizes(func(p *sim.Pod) int64 { return p.Memory }), nt.Memory, maxNodeCuts) {
			specs = append(specs, rowSpec{func(p *sim.Pod) float64 { return ratio(dff(p.Memory, nt.Memory, e), nt.Memory) }, N})
		}
		for _, rs := range specs {
			r := lp.addRow(rs.rhs)
			for s := range pp.shapes {
				if !fits[s][t] {
					continue
				}
				if v := rs.coef(&pp.shapes[s].pod); v != 0 {
					j := s*len(types) + t
					colRows[j] = append(colRows[j], r)
					colVals[j] = append(colVals[j], v)
				}
			}
		}
	}
	for s := range pp.shapes {
		for t := range types {
			if !fits[s][t] {
				continue
			}
			j := s*len(types) + t
			pp.colShape = append(pp.colShape, s)
			pp.colType = append(pp.colType, t)
			lp.cols = append(lp.cols, lpCol{
				c:      float64(pp.shapes[s].pod.GPUMilli()) / sim.MilliPerGPU,
				supply: supply[s],
				rows:   colRows[j],
				vals:   colVals[j],
			})
		}
	}
	if len(lp.cols) > 0 {
		pp.lp = lp
	}
	return pp, nil
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

// dffEpsilons picks the e of the u^ε cuts for items of the given sizes in a
// bin of capacity: for each size v above half the bin, e = capacity - v + 1
// makes v count as a full bin; at most limit of them, spread over the
// sorted candidates.
func dffEpsilons(sizes []int64, capacity int64, limit int) []int64 {
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
	if len(cand) <= limit {
		return cand
	}
	if limit < 2 {
		return cand[:limit]
	}
	out := make([]int64, 0, limit)
	for k := range limit {
		out = append(out, cand[k*(len(cand)-1)/(limit-1)])
	}
	return out
}

// cardCut is a valid inequality for one card: whatever pods share a card,
// the sum of value[milli] over them is at most limit.
type cardCut struct {
	value map[int64]float64
	limit float64
}

// cardCuts returns the card cuts for pods of the given per-card milli
// sizes (see packBound), without duplicates and without the plain milli
// sum (the GPU row).
func cardCuts(sizes []int64) []cardCut {
	distinct := map[int64]bool{}
	var vs []int64
	for _, v := range sizes {
		if !distinct[v] {
			distinct[v] = true
			vs = append(vs, v)
		}
	}
	sort.Slice(vs, func(i, j int) bool { return vs[i] < vs[j] })
	fk := func(k, v int64) float64 {
		if (k+1)*v%sim.MilliPerGPU == 0 {
			return float64(v) / sim.MilliPerGPU
		}
		return float64((k+1)*v/sim.MilliPerGPU) / float64(k)
	}
	var funcs []func(v int64) float64
	eps := dffEpsilons(vs, sim.MilliPerGPU, maxCardEpsilons)
	for _, e := range eps {
		funcs = append(funcs, func(v int64) float64 { return float64(dff(v, sim.MilliPerGPU, e)) / sim.MilliPerGPU })
	}
	for k := int64(2); k <= maxFKLarge; k++ {
		if k <= maxFK {
			funcs = append(funcs, func(v int64) float64 { return fk(k, v) })
		}
		for i, e := range eps {
			if k > maxFK && i >= 2 {
				break // only the two largest share sizes beyond maxFK
			}
			funcs = append(funcs, func(v int64) float64 { return fk(k, dff(v, sim.MilliPerGPU, e)) })
		}
	}
	var out []cardCut
	seen := map[string]bool{}
	vals := make([]float64, len(vs))
	for _, f := range funcs {
		plain := true
		for i, v := range vs {
			vals[i] = f(v)
			plain = plain && vals[i] == float64(v)/sim.MilliPerGPU
		}
		limit := knapsack(vs, vals, sim.MilliPerGPU)
		key := fmt.Sprint(vals, limit)
		if limit <= 0 || plain && limit == 1 || seen[key] {
			continue
		}
		seen[key] = true
		c := cardCut{value: make(map[int64]float64, len(vs)), limit: limit}
		for i, v := range vs {
			c.value[v] = vals[i]
		}
		out = append(out, c)
	}
	return out
}

// knapsack is the largest sum of values of a multiset of the sizes (each
// any number of times) whose sizes sum to at most capacity.
func knapsack(sizes []int64, values []float64, capacity int64) float64 {
	best := make([]float64, capacity+1)
	for c := int64(1); c <= capacity; c++ {
		b := best[c-1]
		for i, s := range sizes {
			if s > 0 && s <= c {
				b = max(b, best[c-s]+values[i])
			}
		}
		best[c] = b
	}
	return best[capacity]
}
