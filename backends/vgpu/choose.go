package vgpu

import (
	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
)

// stackCards is the node size whose scratch space lives on the stack.
const stackCards = 16

// maxCombinations bounds the exhaustive topology search; larger searches
// are greedy.
const maxCombinations = 20000

// pick is one card chosen for one container.
type pick struct {
	candidate
	ctr   int32
	cores int32
}

// scratch is the working space of one choice, on the stack for nodes of
// up to stackCards cards.
type scratch struct {
	workBuf [stackCards]cardState
	candBuf [stackCards]candidate
	pickBuf [stackCards]pick
	selBuf  [stackCards]int
	// forced are, when a phased choice failed (choosePhased), the cards
	// the failed container had to take; nil otherwise.
	forced []int32
	// host is the node's free CPU and memory for this call (the fragment
	// policy's card ranking reads it; zero: unknown, plentiful).
	host device.Host
}

// choose picks the cards of every container of req, in container order,
// on a copy of the node's cards (work), and returns the picks. FilterNode,
// ScoreNode and Allocate all call it, so the cards a node is scored for are
// the cards Allocate takes. failed is the index in req.ctrs of the first
// container that does not fit (-1 when all do); work then holds the cards
// as the earlier containers left them, for explain. A pod whose init
// containers ask for cards is placed by choosePhased.
func (d *Devices) choose(req *request.Pod, s *scratch) (picks []pick, work []cardState, failed int) {
	if req.Inits > 0 {
		return d.choosePhased(req, s)
	}
	work = append(s.workBuf[:0], d.cards...)
	picks = s.pickBuf[:0]
	cands := s.candBuf[:0]
	ctrs := req.Ctrs()
	for f := range ctrs {
		cr := &ctrs[f]
		cands = cardfit.Fitting(cands[:0], len(work), func(i int) (reason, candidate) { return d.check(i, &work[i], cr, req) })
		if req.CardPolicy == PolicyFragment && cr.Nums == 1 {
			d.fragRank(cr, work, cands, s.host)
		}
		sel := d.selectCards(req, cands, int(cr.Nums), s.selBuf[:0])
		if sel == nil {
			return picks, work, f
		}
		for _, k := range sel {
			c := cands[k]
			w := &work[c.card]
			w.UsedMiB += c.mem
			w.UsedCores += cr.Cores
			w.UsedNum++
			if c.migPos >= 0 {
				w.migGroup = c.migGroup
				w.migUsed |= 1 << uint(c.migPos)
			}
			picks = append(picks, pick{candidate: c, ctr: int32(cr.Entry), cores: cr.Cores})
		}
	}
	return picks, work, -1
}

// selectCards returns the positions in cands of the k cards to take, or
// nil when there are fewer than k (on one NUMA node, when req binds NUMA).
// cands is reordered.
func (d *Devices) selectCards(req *request.Pod, cands []candidate, k int, out []int) []int {
	if len(cands) < k || k <= 0 {
		return nil
	}
	topo := req.CardPolicy == PolicyTopologyAware && d.links != nil
	rankPolicy := req.CardPolicy
	if rankPolicy == PolicyTopologyAware {
		rankPolicy = req.NodePolicy
	}
	numa := req.NUMABind && k > 1
	sortCandidates(cands, rankPolicy, numa)
	if !numa {
		return d.selectIn(cands, 0, len(cands), k, topo, rankPolicy, out)
	}
	var best []int
	var bestObj objective
	for lo := 0; lo < len(cands); {
		hi := lo
		for hi < len(cands) && cands[hi].numa == cands[lo].numa {
			hi++
		}
		if hi-lo >= k {
			sel := d.selectIn(cands, lo, hi, k, topo, rankPolicy, make([]int, 0, k))
			if obj := d.objectiveOf(cands, sel, topo, rankPolicy); best == nil || obj.better(bestObj) {
				best, bestObj = sel, obj
			}
		}
		lo = hi
	}
	if best == nil {
		return nil
	}
	return append(out, best...)
}

// selectIn picks k of cands[lo:hi], which are in rank order.
func (d *Devices) selectIn(cands []candidate, lo, hi, k int, topo bool, policy string, out []int) []int {
	if !topo {
		for i := lo; i < lo+k; i++ {
			out = append(out, i)
		}
		return out
	}
	if k == 1 {
		// A single card takes the one with the worst links, keeping
		// well-linked sets free; rank order breaks ties.
		best := lo
		for i := lo + 1; i < hi; i++ {
			if cands[i].linkSum < cands[best].linkSum {
				best = i
			}
		}
		return append(out, best)
	}
	if binomial(hi-lo, k) > maxCombinations {
		return d.greedyLinks(cands, lo, hi, k, out)
	}
	cur := make([]int, 0, k)
	var best []int
	var bestObj objective
	var walk func(start int)
	walk = func(start int) {
		if len(cur) == k {
			if obj := d.objectiveOf(cands, cur, true, policy); best == nil || obj.better(bestObj) {
				best, bestObj = append(best[:0], cur...), obj
			}
			return
		}
		for i := start; i <= hi-(k-len(cur)); i++ {
			cur = append(cur, i)
			walk(i + 1)
			cur = cur[:len(cur)-1]
		}
	}
	walk(lo)
	return append(out, best...)
}

// greedyLinks grows a set from the best-ranked card, adding the card with
// the highest link score to the set each time.
func (d *Devices) greedyLinks(cands []candidate, lo, hi, k int, out []int) []int {
	out = append(out, lo)
	taken := make([]bool, hi-lo)
	taken[0] = true
	for len(out) < k {
		best, bestScore := -1, int64(-1)
		for i := lo; i < hi; i++ {
			if taken[i-lo] {
				continue
			}
			var s int64
			for _, j := range out {
				s += d.link(cands[i].card, cands[j].card)
			}
			if s > bestScore {
				best, bestScore = i, s
			}
		}
		taken[best-lo] = true
		out = append(out, best)
	}
	return out
}

// link is the score of the link between two cards, both directions.
func (d *Devices) link(a, b int32) int64 {
	n := int32(len(d.info))
	return int64(d.links[a*n+b]) + int64(d.links[b*n+a])
}

// objective compares candidate sets: links (pairwise score, or minus the
// link sum for one card) first when topology-aware, then rank.
type objective struct {
	links int64
	rank  float64
}

func (o objective) better(p objective) bool {
	if o.links != p.links {
		return o.links > p.links
	}
	return o.rank > p.rank
}

func (d *Devices) objectiveOf(cands []candidate, sel []int, topo bool, policy string) objective {
	var o objective
	for x, i := range sel {
		if policy == device.PolicySpread {
			o.rank -= cands[i].before
		} else {
			o.rank += cands[i].after
		}
		if !topo {
			continue
		}
		if len(sel) == 1 {
			o.links = -cands[i].linkSum
		}
		for _, j := range sel[:x] {
			o.links += d.link(cands[i].card, cands[j].card)
		}
	}
	return o
}

// sortCandidates orders candidates by policy (binpack: fullest after
// placement first; spread: emptiest first; ties by card index), grouped by
// NUMA node first when byNUMA. Insertion sort: nodes have few cards.
func sortCandidates(c []candidate, policy string, byNUMA bool) {
	less := func(a, b *candidate) bool {
		if byNUMA && a.numa != b.numa {
			return a.numa < b.numa
		}
		if policy == device.PolicySpread {
			if a.before != b.before {
				return a.before < b.before
			}
		} else if a.after != b.after {
			return a.after > b.after
		}
		return a.card < b.card
	}
	for i := 1; i < len(c); i++ {
		for j := i; j > 0 && less(&c[j], &c[j-1]); j-- {
			c[j], c[j-1] = c[j-1], c[j]
		}
	}
}

// binomial returns n choose k, saturating above maxCombinations.
func binomial(n, k int) int {
	if k > n-k {
		k = n - k
	}
	r := 1
	for i := 1; i <= k; i++ {
		r = r * (n - k + i) / i
		if r > maxCombinations {
			return maxCombinations + 1
		}
	}
	return r
}

// score turns the picks into the node score under the node policy, in
// [0, MaxScore]: binpack is the mean fullness of the chosen cards after
// placement, spread one minus their mean fullness before it (idle cards
// score MaxScore).
func score(picks []pick, policy string) float64 {
	return cardfit.NodeScore(policy, len(picks), func(i int) (float64, float64) { return picks[i].before, picks[i].after })
}
