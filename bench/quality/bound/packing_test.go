package bound

import (
	"math/rand"
	"testing"

	"github.com/vgpushare/vshare/bench/quality/sim"
)

// TestOfflinePlansBelowOptimum replays the offline plans of random
// arrival lists on random small clusters: every placement must be
// feasible (Cluster.Place checks it) and the allocation after every
// arrival at most the exhaustive optimum of that prefix.
func TestOfflinePlansBelowOptimum(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	checked := 0
	smallArrivalLists(rng, 60, func(i int, tr *sim.Trace, pods []sim.Pod) {
		nodes := tr.Nodes
		arr := &sim.Arrivals{Pods: pods, Rank: rng.Perm(len(nodes))}
		for _, last := range []int{len(pods) / 2, len(pods) - 1} {
			plans, err := offlinePlans(tr, arr, last, leastLeft)
			if err != nil {
				t.Fatalf("instance %d: %v", i, err)
			}
			if len(plans) != 3 {
				t.Fatalf("instance %d: %d plans, want typed and two admitted", i, len(plans))
			}
			for k, plan := range plans {
				if len(plan) != last+1 {
					t.Fatalf("instance %d plan %d: %d placements for %d arrivals", i, k, len(plan), last+1)
				}
				c := sim.NewCluster(tr, arr.Rank)
				for j, pl := range plan {
					if !pl.OK {
						continue
					}
					if err := c.Place(pl.Node, pl.Cards, &pods[j]); err != nil {
						t.Fatalf("instance %d plan %d arrival %d: %v", i, k, j, err)
					}
					if opt := optimum(nodes, pods[:j+1]); c.Used > opt {
						t.Fatalf("instance %d plan %d: %d milli placed after arrival %d, above the optimum %d", i, k, c.Used, j, opt)
					}
				}
				checked++
			}
		}
	})
	if checked < 20 {
		t.Errorf("only %d plans checked; want at least 20", checked)
	}
}

// leastLeft is the online policy of the admitted plans here: each pod
// where it leaves the least (packWhere). The report's online policy,
// fragment, lives above this package; the property checked holds for any
// policy, since Cluster.Place checks every placement.
func leastLeft(sim.Env) (sim.Policy, error) { return leastLeftPolicy{}, nil }

type leastLeftPolicy struct{}

func (leastLeftPolicy) Place(c *sim.Cluster, p *sim.Pod) (int, []int, bool, error) {
	n, cards := packWhere(c, p, nil)
	return n, cards, n >= 0, nil
}

// TestPlannedPolicyFollowsArrivalOrder checks that a plan replayed on
// other arrivals than it was made for is an error, not a silent
// misplacement.
func TestPlannedPolicyFollowsArrivalOrder(t *testing.T) {
	pods := []sim.Pod{{Name: "a", NumGPU: 1, Milli: 500}, {Name: "b", NumGPU: 1, Milli: 500}}
	pol, err := replay(pods, []sim.Placement{{Node: 0, Cards: []int{0}, OK: true}})(sim.Env{})
	if err != nil {
		t.Fatal(err)
	}
	if n, _, ok, err := pol.Place(nil, &pods[0]); err != nil || !ok || n != 0 {
		t.Fatalf("first arrival: node %d, ok %v, err %v; want node 0 as planned", n, ok, err)
	}
	if _, _, ok, err := pol.Place(nil, &pods[1]); err != nil || ok {
		t.Fatalf("arrival past the plan: ok %v, err %v; want left unplaced", ok, err)
	}
	pol, _ = replay(pods, nil)(sim.Env{})
	if _, _, _, err := pol.Place(nil, &pods[1]); err == nil {
		t.Fatal("arrival b where the plan expects a: want an error")
	}
}
