package vnpu

import (
	"cmp"
	"slices"
)

// MaxScore is the best batch score.
const MaxScore = 100

// Candidate is one node that can take a vNPU request.
type Candidate struct {
	// Node names the node.
	Node string
	// FreeAICores is the node's free AI cores before the request.
	FreeAICores int64
	// Downgraded is true when the request fits the node only after a
	// downgrade (see Downgrade).
	Downgraded bool
}

// BatchScore ranks candidates and scores them in [0, MaxScore]: nodes that
// need no downgrade first, then the fewest free AI cores (packing chips
// fills nodes and keeps others whole), then the node name. The best node
// scores MaxScore, the others evenly less, and every downgraded node scores
// below every node that needs none.
func BatchScore(cands []Candidate) map[string]float64 { return batchScore(cands, false) }

// BatchScoreSpread is BatchScore for the spread policy: nodes that need no
// downgrade still come first, then the most free AI cores (keeping load
// apart), then the node name.
func BatchScoreSpread(cands []Candidate) map[string]float64 { return batchScore(cands, true) }

func batchScore(cands []Candidate, mostFreeFirst bool) map[string]float64 {
	order := slices.Clone(cands)
	slices.SortFunc(order, func(a, b Candidate) int {
		if a.Downgraded != b.Downgraded {
			if a.Downgraded {
				return 1
			}
			return -1
		}
		if c := cmp.Compare(a.FreeAICores, b.FreeAICores); c != 0 {
			if mostFreeFirst {
				return -c
			}
			return c
		}
		return cmp.Compare(a.Node, b.Node)
	})
	out := make(map[string]float64, len(order))
	n := float64(len(order))
	for i, c := range order {
		out[c.Node] = MaxScore * (n - float64(i)) / n
	}
	return out
}
