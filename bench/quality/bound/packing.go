package bound

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/vgpushare/vshare/bench/quality/sim"
)

// OfflinePacking is the most that offline placements of a seed's arrivals
// are found to reach at 100% and 130% arrival, in Curve.At's units: the
// other end of UpperBound. A placement here knows every arrival in advance
// and may leave any pod unplaced, so it is no policy a scheduler could
// run; the best offline placement lies between this and the bound, so the
// two show how much of a policy's distance to the bound is the
// relaxation's slack and how much is what placing pods online costs.
//
// For each point, the pods arrived by the last event Curve.At averages
// over are placed in several ways, and the best curve value is kept:
//
//   - typed: the bound's own linear relaxation, with exact pod shapes,
//     says how many pods of each shape go to each node type (its solution
//     rounded down); in arrival order each pod goes to a node of a type
//     with quota left for its shape, where it leaves the least
//     (packWhere); the pods that found no place are then tried on any
//     node, in arrival order;
//   - admitted: the same quotas summed over node types decide which pods
//     are taken at all, per shape, and in a second plan per kind (cards,
//     milli and gpu_spec, whatever the CPU and memory); the online
//     policy places the admitted pods in arrival order, then the others
//     go where they leave the least;
//   - online: the online policy alone (one run gives both points), so
//     the result is never below what that policy reaches.
//
// online is the policy the plans start from and must beat; the report
// passes the fragment policy (quality.OfflinePacking).
//
// Pods without GPUs are left out (refusing them loses no GPU). Each plan
// is replayed through the simulator (Run), which checks every placement,
// and measured exactly as a policy is.
func OfflinePacking(t *sim.Trace, seed int64, online sim.Factory) (Bound, error) {
	if len(t.Nodes) == 0 {
		return Bound{}, fmt.Errorf("trace %s: no GPU nodes", t.Name)
	}
	// The online policy alone: one run gives both points.
	base, err := sim.Run(t, online, seed)
	if err != nil {
		return Bound{}, fmt.Errorf("trace %s offline packing: %w", t.Name, err)
	}
	var b Bound
	if _, b.Alloc100, err = offlineBest(t, seed, 100, online, base.At(100)); err != nil {
		return Bound{}, err
	}
	if _, b.Alloc130, err = offlineBest(t, seed, sim.MaxArrival, online, base.At(sim.MaxArrival)); err != nil {
		return Bound{}, err
	}
	return b, nil
}

// OfflineFactory is the factory of the placement OfflinePacking keeps for
// arrival point a (a percentage of capacity reached by the arrivals): the
// best plan for the run's seed, replayed, or the online policy when no
// plan beats it. It plans when the policy is created, so creating one
// costs what OfflinePacking costs for one point.
func OfflineFactory(a int, online sim.Factory) sim.Factory {
	return func(env sim.Env) (sim.Policy, error) {
		base, err := sim.Run(env.Trace, online, env.Seed)
		if err != nil {
			return nil, err
		}
		f, _, err := offlineBest(env.Trace, env.Seed, a, online, base.At(a))
		if err != nil {
			return nil, err
		}
		return f(env)
	}
}

// offlineBest returns the best of offlinePlans at arrival point a and its
// curve value, or the online policy and base, its value at a, when no
// plan is above it.
func offlineBest(t *sim.Trace, seed int64, a int, online sim.Factory, base float64) (sim.Factory, float64, error) {
	arr := sim.Arrange(t, seed)
	bins, _ := arrivalCurve(t, arr.Pods)
	_, last := eventsFor(bins, a)
	if last < 0 {
		return nil, 0, fmt.Errorf("trace %s seed %d: arrivals never come within 1 of %d%% of capacity", t.Name, seed, a)
	}
	plans, err := offlinePlans(t, arr, last, online)
	if err != nil {
		return nil, 0, fmt.Errorf("trace %s seed %d offline packing at %d%%: %w", t.Name, seed, a, err)
	}
	best, value := online, base
	for _, plan := range plans {
		f := replay(arr.Pods, plan)
		curve, err := sim.Run(t, f, seed)
		if err != nil {
			return nil, 0, fmt.Errorf("trace %s seed %d offline packing at %d%%: %w", t.Name, seed, a, err)
		}
		if v := curve.At(a); v > value {
			best, value = f, v
		}
	}
	return best, value, nil
}

// MeanOfflinePacking is OfflinePacking averaged over the seeds as
// Evaluate averages a policy.
func MeanOfflinePacking(t *sim.Trace, seeds []int64, online sim.Factory) (Bound, error) {
	return meanOverSeeds(t, seeds, "the offline packing", func(t *sim.Trace, seed int64) (Bound, error) {
		return OfflinePacking(t, seed, online)
	})
}

// replay is the factory of a policy that places the i-th of pods as
// plan[i] says and nothing past the plan.
func replay(pods []sim.Pod, plan []sim.Placement) sim.Factory {
	return func(sim.Env) (sim.Policy, error) { return &plannedPolicy{pods: pods, plan: plan}, nil }
}

type plannedPolicy struct {
	pods []sim.Pod
	plan []sim.Placement
	next int
}

func (p *plannedPolicy) Place(_ *sim.Cluster, pod *sim.Pod) (int, []int, bool, error) {
	i := p.next
	if i >= len(p.pods) || p.pods[i].Name != pod.Name {
		return -1, nil, false, fmt.Errorf("offline plan: arrival %d is %s, not the planned arrivals' order", i, pod.Name)
	}
	p.next++
	if i >= len(p.plan) {
		return -1, nil, false, nil
	}
	pl := p.plan[i]
	return pl.Node, pl.Cards, pl.OK, nil
}

// offlinePlans returns OfflinePacking's typed placement and its two
// admitted ones of the arrivals up to last, each one Placement per
// arrival; online places the admitted pods.
func offlinePlans(t *sim.Trace, arr *sim.Arrivals, last int, online sim.Factory) ([][]sim.Placement, error) {
	pods := arr.Pods[:last+1]
	pp, err := newPackProgram(t.Nodes, pods, 1, 1)
	if err != nil {
		return nil, err
	}
	// quota[s][τ]: pods of shape s the relaxation puts on nodes of type τ,
	// rounded down; admit[s] its sum over the types; shapeOf[i] the shape
	// of pod i (-1: no GPU).
	quota := make([][]int, len(pp.shapes))
	admit := make([]int, len(pp.shapes))
	for s := range quota {
		quota[s] = make([]int, len(pp.types))
	}
	if pp.lp != nil {
		_, x := pp.lp.solve()
		for j, v := range x {
			q := int(math.Floor(v + 1e-6))
			quota[pp.colShape[j]][pp.colType[j]] += q
			admit[pp.colShape[j]] += q
		}
	}
	shapeOf := make([]int, len(pods))
	for i := range shapeOf {
		shapeOf[i] = -1
	}
	for s, sh := range pp.shapes {
		for _, i := range sh.pods {
			shapeOf[i] = s
		}
	}
	typeOf := make([]int, len(t.Nodes))
	for τ, nt := range pp.types {
		for _, n := range nt.nodes {
			typeOf[n] = τ
		}
	}

	typed, err := typedPlan(t, arr, shapeOf, typeOf, quota)
	if err != nil {
		return nil, err
	}
	plans := [][]sim.Placement{typed}
	// Admission by shape, then by kind (cards, milli, gpu_spec: the
	// relaxation's count of 810-milli shares, whatever their CPU).
	kindOf, kindAdmit := kinds(pp.shapes, shapeOf, admit)
	for _, a := range [][2][]int{{shapeOf, admit}, {kindOf, kindAdmit}} {
		plan, err := admittedPlan(t, arr, a[0], a[1], online)
		if err != nil {
			return nil, err
		}
		plans = append(plans, plan)
	}
	return plans, nil
}

// kinds groups shapes by cards, milli and gpu_spec: kindOf[i] is pod i's
// kind (-1: no GPU), admit the kinds' summed quotas.
func kinds(shapes []packShape, shapeOf, shapeAdmit []int) (kindOf, admit []int) {
	kindIdx := map[string]int{}
	kindOfShape := make([]int, len(shapes))
	for s, sh := range shapes {
		k := fmt.Sprintf("%d/%d/%s", sh.pod.NumGPU, sh.pod.Milli, strings.Join(sh.pod.Spec, "|"))
		j, ok := kindIdx[k]
		if !ok {
			j = len(admit)
			kindIdx[k] = j
			admit = append(admit, 0)
		}
		kindOfShape[s] = j
		admit[j] += shapeAdmit[s]
	}
	kindOf = make([]int, len(shapeOf))
	for i, s := range shapeOf {
		kindOf[i] = -1
		if s >= 0 {
			kindOf[i] = kindOfShape[s]
		}
	}
	return kindOf, admit
}

// typedPlan places each GPU pod, in arrival order, on a node of a type
// with quota left for its shape, where it leaves the least, then the pods
// that found no place on any node.
func typedPlan(t *sim.Trace, arr *sim.Arrivals, shapeOf, typeOf []int, quota [][]int) ([]sim.Placement, error) {
	pods := arr.Pods[:len(shapeOf)]
	pl := newPlanner(t, arr, len(shapeOf))
	err := pl.twoPasses(shapeOf, func(c *sim.Cluster, i int, first bool) (int, []int, bool, error) {
		if !first {
			n, cards := packWhere(c, &pods[i], nil)
			return n, cards, false, nil
		}
		s := shapeOf[i]
		n, cards := packWhere(c, &pods[i], func(n int) bool { return quota[s][typeOf[n]] > 0 })
		if n >= 0 {
			quota[s][typeOf[n]]--
		}
		return n, cards, true, nil
	})
	return pl.plan, err
}

// admittedPlan lets the online policy place, in arrival order, the GPU
// pods admit has room for (admit[classOf[i]] for pod i; classOf -1: no
// GPU), then places the pods it held back where they leave the least.
func admittedPlan(t *sim.Trace, arr *sim.Arrivals, classOf, admit []int, online sim.Factory) ([]sim.Placement, error) {
	pods := arr.Pods[:len(classOf)]
	pol, err := online(sim.Env{Trace: t})
	if err != nil {
		return nil, err
	}
	left := slices.Clone(admit)
	pl := newPlanner(t, arr, len(classOf))
	err = pl.twoPasses(classOf, func(c *sim.Cluster, i int, first bool) (int, []int, bool, error) {
		s := classOf[i]
		if !first {
			n, cards := packWhere(c, &pods[i], nil)
			return n, cards, false, nil
		}
		if left[s] <= 0 {
			return -1, nil, true, nil
		}
		n, cards, ok, err := pol.Place(c, &pods[i])
		if err != nil || !ok {
			// No retry: space only shrinks, so a pod that fits
			// nowhere now never will.
			return -1, nil, false, err
		}
		left[s]--
		return n, cards, false, nil
	})
	return pl.plan, err
}

// planner builds one plan on a cluster of its own.
type planner struct {
	pods []sim.Pod
	c    *sim.Cluster
	plan []sim.Placement
}

func newPlanner(t *sim.Trace, arr *sim.Arrivals, n int) *planner {
	plan := make([]sim.Placement, n)
	for i := range plan {
		plan[i].Node = -1
	}
	return &planner{pods: arr.Pods[:n], c: sim.NewCluster(t, arr.Rank), plan: plan}
}

// twoPasses offers every GPU pod (classOf >= 0) in arrival order to
// where (first true), then the pods it found no place for and asked to
// retry once more (first false), placing each where where says (-1:
// nowhere).
func (p *planner) twoPasses(classOf []int, where func(c *sim.Cluster, i int, first bool) (n int, cards []int, retry bool, err error)) error {
	var left []int
	for _, first := range []bool{true, false} {
		todo := left
		if first {
			todo = nil
			for i := range p.pods {
				if classOf[i] >= 0 {
					todo = append(todo, i)
				}
			}
		}
		left = nil
		for _, i := range todo {
			n, cards, retry, err := where(p.c, i, first)
			if err != nil {
				return err
			}
			if n < 0 {
				if retry {
					left = append(left, i)
				}
				continue
			}
			if err := p.c.Place(n, cards, &p.pods[i]); err != nil {
				return fmt.Errorf("offline plan: %w", err)
			}
			p.plan[i] = sim.Placement{Node: n, Cards: cards, OK: true}
		}
	}
	return nil
}

// packWhere is the node, among those allowed (nil: all), and the cards
// where p leaves the least: for a share of one card the card with the
// least free milli that holds it, else the node with the fewest cards
// holding p's milli, then its cards with the least free milli; the
// smaller rank on ties; -1 when p fits nowhere.
func packWhere(c *sim.Cluster, p *sim.Pod, allowed func(n int) bool) (int, []int) {
	best, bestKey := -1, int64(0)
	for n := range c.Nodes {
		if allowed != nil && !allowed(n) || !c.Feasible(n, p) {
			continue
		}
		s := &c.Nodes[n]
		var key int64
		if p.NumGPU == 1 && p.Milli < sim.MilliPerGPU {
			key = s.Free[sim.BestFitCard(s.Free, p.Milli)]
		} else {
			for _, f := range s.Free {
				if f >= p.Milli {
					key++
				}
			}
		}
		if best < 0 || key < bestKey || key == bestKey && c.Rank[n] < c.Rank[best] {
			best, bestKey = n, key
		}
	}
	if best < 0 {
		return -1, nil
	}
	free := c.Nodes[best].Free
	cards := make([]int, 0, len(free))
	for g := range free {
		if free[g] >= p.Milli {
			cards = append(cards, g)
		}
	}
	slices.SortStableFunc(cards, func(a, b int) int { return int(free[a] - free[b]) })
	return best, cards[:p.NumGPU]
}
