package quality

import (
	"math"
	"sort"
	"strings"
)

// targetCoverage is the share of the pod list the FGD target workload
// keeps, most frequent pod classes first.
const targetCoverage = 0.95

// targetPod is one class of the FGD target workload with its weight.
type targetPod struct {
	cpu, milli int64
	num        int
	spec       []string
	specKey    string
	weight     float64
}

// fgdKey is a pod class: what FGD's fragmentation depends on.
type fgdKey struct {
	cpu, milli int64
	num        int
	spec       string
}

// targetWorkload counts the pod list by class and keeps the most frequent
// classes up to targetCoverage of the pods, weighted by their share of the
// kept ones.
func targetWorkload(pods []Pod) []targetPod {
	counts := map[fgdKey]int{}
	specs := map[string][]string{}
	for i := range pods {
		p := &pods[i]
		k := fgdKey{cpu: p.CPU, milli: p.Milli, num: p.NumGPU, spec: strings.Join(p.Spec, "|")}
		counts[k]++
		specs[k.spec] = p.Spec
	}
	keys := make([]fgdKey, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		switch {
		case counts[a] != counts[b]:
			return counts[a] > counts[b]
		case a.cpu != b.cpu:
			return a.cpu > b.cpu
		case a.milli != b.milli:
			return a.milli > b.milli
		case a.num != b.num:
			return a.num > b.num
		}
		return a.spec > b.spec
	})
	n := float64(len(pods))
	cum := 0
	kept := 0
	for _, k := range keys {
		cum += counts[k]
		kept++
		if float64(cum) >= targetCoverage*n {
			break
		}
	}
	out := make([]targetPod, kept)
	for i, k := range keys[:kept] {
		out[i] = targetPod{cpu: k.cpu, milli: k.milli, num: k.num, spec: specs[k.spec], specKey: k.spec,
			weight: (float64(counts[k]) / n) / (float64(cum) / n)}
	}
	return out
}

// accepts reports whether the target class may use the model.
func (t *targetPod) accepts(model string) bool {
	if len(t.spec) == 0 {
		return true
	}
	for _, m := range t.spec {
		if m == model {
			return true
		}
	}
	return false
}

// fragmentation is FGD's expected fragmented GPU milli of a node with
// cpuL free CPU and free cards, for the target workload: every class adds
// its weight times the milli it could not use, into one of seven buckets
// summed in the original's order.
func fragmentation(target []targetPod, cpuL int64, free []int64, model string) float64 {
	var idle int64
	for _, f := range free {
		idle += f
	}
	// Q3, the usable part, is not fragmentation and is not summed.
	var q1, q2, q4, xl, xr, na float64
	for i := range target {
		t := &target[i]
		fi := t.weight * float64(idle)
		if t.num == 0 {
			if cpuL >= t.cpu {
				xl += fi
			} else {
				xr += fi
			}
			continue
		}
		if !t.accepts(model) {
			na += fi
			continue
		}
		fitting := 0
		var small int64
		for _, f := range free {
			if f >= t.milli {
				fitting++
			} else {
				small += f
			}
		}
		cpuOK := cpuL >= t.cpu
		switch {
		case fitting >= t.num && cpuOK:
			q2 += t.weight * float64(small)
		case fitting >= t.num:
			q4 += fi
		case cpuOK:
			q2 += fi
		default:
			q1 += fi
		}
	}
	return q1 + q2 + q4 + xl + xr + na
}

// sigmoidScore is FGD's node score for a fragmentation decrease d.
func sigmoidScore(d float64) int {
	return int(1 / (1 + math.Exp(-d/1000)) * 100)
}

// fgd is the reference Fragmentation Gradient Descent policy.
type fgd struct {
	target []targetPod
	// memo caches each node's score and card per pod class and node
	// version: the score is a pure function of both.
	memo   [][]fgdMemo
	shapes map[fgdKey]int
	work   []int64
	taken  []bool
}

type fgdMemo struct {
	valid   bool
	version uint64
	score   int
	card    int
}

func newFGD(pods []Pod) *fgd {
	return &fgd{target: targetWorkload(pods)}
}

func (g *fgd) Place(c *Cluster, p *Pod) (int, []int, bool, error) {
	if g.memo == nil {
		g.memo = make([][]fgdMemo, len(c.Nodes))
		g.shapes = map[fgdKey]int{}
	}
	// The score ignores the spec (feasibility checks it) and memory.
	key := fgdKey{cpu: p.CPU, milli: p.Milli, num: p.NumGPU}
	id, found := g.shapes[key]
	if !found {
		id = len(g.shapes)
		g.shapes[key] = id
	}
	best, bestScore, bestCard := -1, 0, -1
	for n := range c.Nodes {
		if !c.Feasible(n, p) {
			continue
		}
		s := &c.Nodes[n]
		if id >= len(g.memo[n]) {
			g.memo[n] = append(g.memo[n], make([]fgdMemo, id+1-len(g.memo[n]))...)
		}
		m := &g.memo[n][id]
		if !m.valid || m.version != s.Version {
			m.valid, m.version = true, s.Version
			m.score, m.card = g.score(s, p)
		}
		if c.Better(n, float64(m.score), best, float64(bestScore)) {
			best, bestScore, bestCard = n, m.score, m.card
		}
	}
	if best < 0 {
		return -1, nil, false, nil
	}
	s := &c.Nodes[best]
	if p.NumGPU == 1 && p.Milli < MilliPerGPU {
		return best, []int{bestCard}, true, nil
	}
	return best, lowestFree(s.Free, p.Milli, p.NumGPU), true, nil
}

// score returns the node's FGD score and, for shares, the first card
// reaching it.
func (g *fgd) score(s *NodeState, p *Pod) (int, int) {
	before := fragmentation(g.target, s.CPU, s.Free, s.Model)
	g.work = append(g.work[:0], s.Free...)
	cpu := s.CPU - p.CPU
	if p.NumGPU == 1 && p.Milli < MilliPerGPU {
		best, card := -1, -1
		for i, f := range s.Free {
			if f < p.Milli {
				continue
			}
			g.work[i] -= p.Milli
			sc := sigmoidScore(before - fragmentation(g.target, cpu, g.work, s.Model))
			g.work[i] += p.Milli
			if sc > best {
				best, card = sc, i
			}
		}
		return best, card
	}
	// Take the num cards with the least sufficient free milli.
	g.taken = append(g.taken[:0], make([]bool, len(s.Free))...)
	for k := 0; k < p.NumGPU; k++ {
		pick := -1
		for i, f := range s.Free {
			if !g.taken[i] && f >= p.Milli && (pick < 0 || f < s.Free[pick]) {
				pick = i
			}
		}
		g.taken[pick] = true
		g.work[pick] -= p.Milli
	}
	return sigmoidScore(before - fragmentation(g.target, cpu, g.work, s.Model)), -1
}
