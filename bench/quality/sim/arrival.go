package sim

import "math/rand"

// Inflation is the arrival target: pods keep arriving until 130% of the
// cluster's GPU capacity has been requested.
const (
	inflationNum = 13
	inflationDen = 10
)

// watcherDraws is how many rng.Int63 values the original simulator's
// client-go watchers consume between the arrival order and the node ranks.
const watcherDraws = 10

// Arrivals is one seed's experiment input: the pods in arrival order and
// every node's tie-break rank (by node index in name order; smaller wins).
type Arrivals struct {
	Pods []Pod
	Rank []int
}

// Arrange shuffles and inflates the trace's pods and ranks its nodes for
// the seed, drawing from Go's math/rand v1 exactly as QUALITY.md says so
// that the published seeds 42..51 are reproduced.
func Arrange(t *Trace, seed int64) *Arrivals {
	rng := rand.New(rand.NewSource(seed))
	rng.Int()
	pods := append([]Pod(nil), t.Pods...)
	rng.Shuffle(len(pods), func(i, j int) { pods[i], pods[j] = pods[j], pods[i] })
	target := t.Capacity() * inflationNum / inflationDen
	var tot int64
	for i := range pods {
		tot += pods[i].GPUMilli()
	}
	if tot < target {
		for {
			q := t.Pods[rng.Intn(len(t.Pods))]
			// The original compares with the per-GPU milli, not the
			// pod's total; kept to reproduce its arrival lists.
			if tot+q.Milli > target {
				break
			}
			pods = append(pods, q)
			tot += q.GPUMilli()
		}
	}
	for tot > target {
		i := rng.Intn(len(pods))
		tot -= pods[i].GPUMilli()
		pods = append(pods[:i], pods[i+1:]...)
	}
	for range watcherDraws {
		rng.Int63()
	}
	return &Arrivals{Pods: pods, Rank: rng.Perm(len(t.Nodes))}
}
