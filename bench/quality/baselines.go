package quality

import (
	"math/rand"

	"github.com/vgpushare/vshare/bench/quality/sim"
)

// Normalisers of the reference scores: the largest node of the paper's
// setting, 128 cores and 8 cards.
const (
	maxCPU  = 128000.0
	maxGPUs = 8000.0
)

// Reference policy names.
const (
	PolicyRandom        = "random"
	PolicyDotProd       = "dotprod"
	PolicyBestFit       = "bestfit"
	PolicyGpuPacking    = "gpupacking"
	PolicyGpuClustering = "gpuclustering"
	PolicyFGD           = "fgd"
)

// ReferencePolicies returns the baselines re-implemented from QUALITY.md,
// in the published table's order.
func ReferencePolicies() []string {
	return []string{PolicyFGD, PolicyBestFit, PolicyGpuPacking, PolicyGpuClustering, PolicyDotProd, PolicyRandom}
}

// reference returns the factory of a reference policy, nil for other names.
func reference(name string) Factory {
	switch name {
	case PolicyRandom:
		return func(env Env) (Policy, error) { return &randomPolicy{rng: rand.New(rand.NewSource(env.Seed))}, nil }
	case PolicyDotProd:
		return scored(dotProd{})
	case PolicyBestFit:
		return scored(bestFit{})
	case PolicyGpuPacking:
		return scored(gpuPacking{})
	case PolicyGpuClustering:
		return scored(gpuClustering{})
	case PolicyFGD:
		return func(env Env) (Policy, error) { return newFGD(env.Trace.Pods), nil }
	}
	return nil
}

// scoredPolicy adapts a scorer to Policy.
type scoredPolicy struct{ sc scorer }

func scored(sc scorer) Factory {
	return func(Env) (Policy, error) { return scoredPolicy{sc}, nil }
}

func (s scoredPolicy) Place(c *Cluster, p *Pod) (int, []int, bool, error) {
	return placeByScore(c, p, s.sc)
}

// randomPolicy takes a uniformly random feasible node and, for shares, a
// uniformly random fitting card. The original is not bit-reproducible
// here; only its means are compared.
type randomPolicy struct{ rng *rand.Rand }

func (r *randomPolicy) Place(c *Cluster, p *Pod) (int, []int, bool, error) {
	var feasible []int
	for n := range c.Nodes {
		if c.Feasible(n, p) {
			feasible = append(feasible, n)
		}
	}
	if len(feasible) == 0 {
		return -1, nil, false, nil
	}
	n := feasible[r.rng.Intn(len(feasible))]
	s := &c.Nodes[n]
	if p.NumGPU == 1 && p.Milli < MilliPerGPU {
		fit := lowestFree(s.Free, p.Milli, len(s.Free))
		return n, []int{fit[r.rng.Intn(len(fit))]}, true, nil
	}
	return n, defaultCards(s, p), true, nil
}

// dotProd scores the dot product of the node's free and the pod's asked
// CPU and GPU, lower products higher.
type dotProd struct{}

func (dotProd) score(s *NodeState, p *Pod) int {
	cpuL, gL := float64(s.CPU), float64(s.Idle())
	pc, pg := float64(p.CPU), float64(p.GPUMilli())
	return int(100 * (1 - ((cpuL/maxCPU)*(pc/maxCPU)+(gL/maxGPUs)*(pg/maxGPUs))/2))
}

func (dotProd) cards(s *NodeState, p *Pod) []int { return defaultCards(s, p) }

// bestFit prefers the node with the least CPU and GPU left after placement.
type bestFit struct{}

func (bestFit) score(s *NodeState, p *Pod) int {
	cpuL, gL := float64(s.CPU), float64(s.Idle())
	pc, pg := float64(p.CPU), float64(p.GPUMilli())
	return int((1 - (0.5*(cpuL-pc)/maxCPU + 0.5*(gL-pg)/maxGPUs)) * 100)
}

func (bestFit) cards(s *NodeState, p *Pod) []int { return defaultCards(s, p) }

// gpuPacking prefers partly used cards, then nodes with some used cards,
// then idle nodes with few cards.
type gpuPacking struct{}

func (gpuPacking) score(s *NodeState, p *Pod) int {
	if p.NumGPU == 0 {
		return 0
	}
	nfree := 0
	for _, f := range s.Free {
		if f == MilliPerGPU {
			nfree++
		}
	}
	if nfree == len(s.Free) {
		return max(33-nfree, nfree)
	}
	order := make([]int, len(s.Free))
	for i := range order {
		order[i] = i
	}
	// Stable insertion sort by free milli, ascending.
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && s.Free[order[j]] < s.Free[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	var sumFree int64
	taken, whole := 0, 0
	for _, g := range order {
		if taken == p.NumGPU {
			break
		}
		if s.Free[g] >= p.Milli {
			taken++
			sumFree += s.Free[g]
			if s.Free[g] == MilliPerGPU {
				whole++
			}
		}
	}
	if whole > 0 {
		return max(50-whole, 33)
	}
	return int(max(100-(sumFree*100/MilliPerGPU)/10, 50))
}

func (gpuPacking) cards(s *NodeState, p *Pod) []int { return defaultCards(s, p) }

// gpuClustering keeps pods of one class (a share, or k whole cards)
// together, then prefers fuller nodes.
type gpuClustering struct{}

func (gpuClustering) score(s *NodeState, p *Pod) int {
	if p.NumGPU == 0 {
		return 0
	}
	b := 25 * (maxGPUs - float64(s.Idle())) / maxGPUs
	tag := sim.ClusterTag(p)
	switch n := s.TagPods(tag); {
	case n > 0 && n == s.GPUPods():
		b += 75
	case n > 0:
		b += 50
	case s.GPUPods() == 0:
		b += 25
	}
	return int(b)
}

func (gpuClustering) cards(s *NodeState, p *Pod) []int { return defaultCards(s, p) }

// lowestFree returns the lowest-index k cards with at least milli free.
func lowestFree(free []int64, milli int64, k int) []int {
	out := make([]int, 0, k)
	for g, f := range free {
		if len(out) == k {
			break
		}
		if f >= milli {
			out = append(out, g)
		}
	}
	return out
}

// defaultCards is the card choice of every baseline but Random and FGD:
// whole and multi-card pods take the lowest-index fully free cards, shares
// the best fit.
func defaultCards(s *NodeState, p *Pod) []int {
	switch {
	case p.NumGPU == 0:
		return nil
	case p.NumGPU == 1 && p.Milli < MilliPerGPU:
		return []int{sim.BestFitCard(s.Free, p.Milli)}
	default:
		return lowestFree(s.Free, p.Milli, p.NumGPU)
	}
}

// scorer is the node score and card choice of a score-based reference
// policy; Place is the shared argmax with rank tie-breaks.
type scorer interface {
	score(s *NodeState, p *Pod) int
	cards(s *NodeState, p *Pod) []int
}

// placeByScore takes the feasible node with the highest integer score,
// the smallest rank on ties.
func placeByScore(c *Cluster, p *Pod, sc scorer) (int, []int, bool, error) {
	best, bestScore := -1, 0
	for n := range c.Nodes {
		if !c.Feasible(n, p) {
			continue
		}
		s := sc.score(&c.Nodes[n], p)
		if c.Better(n, float64(s), best, float64(bestScore)) {
			best, bestScore = n, s
		}
	}
	if best < 0 {
		return -1, nil, false, nil
	}
	return best, sc.cards(&c.Nodes[best], p), true, nil
}
