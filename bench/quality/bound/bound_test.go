package bound

import (
	"math/rand"
	"testing"

	"github.com/vgpushare/vshare/bench/quality/sim"
)

// optimum is the best GPU milli any placement of any subset of pods on
// nodes allocates, by exhaustive search over every pod's every node and
// card choice (pods taken in order, each placed or refused), written apart
// from Cluster so that it checks the bound against an independent oracle.
func optimum(nodes []sim.Node, pods []sim.Pod) int64 {
	type state struct {
		cpu, mem int64
		free     []int64
	}
	st := make([]state, len(nodes))
	for i, n := range nodes {
		st[i] = state{cpu: n.CPU, mem: n.Memory, free: make([]int64, n.GPUs)}
		for g := range st[i].free {
			st[i].free[g] = sim.MilliPerGPU
		}
	}
	rest := make([]int64, len(pods)+1)
	for i := len(pods) - 1; i >= 0; i-- {
		rest[i] = rest[i+1] + pods[i].GPUMilli()
	}
	var best, used int64
	var rec func(i int)
	// cards picks k of node n's cards with at least milli free, from card
	// g on, then recurses to pod i+1.
	var cards func(i, n, g, k int)
	cards = func(i, n, g, k int) {
		if k == 0 {
			rec(i + 1)
			return
		}
		p := &pods[i]
		for ; g < len(st[n].free); g++ {
			if st[n].free[g] < p.Milli {
				continue
			}
			st[n].free[g] -= p.Milli
			cards(i, n, g+1, k-1)
			st[n].free[g] += p.Milli
		}
	}
	rec = func(i int) {
		best = max(best, used)
		if i == len(pods) || used+rest[i] <= best {
			return
		}
		p := &pods[i]
		if p.GPUMilli() > 0 {
			for n := range nodes {
				s := &st[n]
				if s.cpu < p.CPU || s.mem < p.Memory || !p.Accepts(nodes[n].Model) {
					continue
				}
				s.cpu -= p.CPU
				s.mem -= p.Memory
				used += p.GPUMilli()
				cards(i, n, 0, p.NumGPU)
				used -= p.GPUMilli()
				s.cpu += p.CPU
				s.mem += p.Memory
			}
		}
		rec(i + 1)
	}
	rec(0)
	return best
}

// randomInstance draws a few nodes and pods with the openb trace's kinds
// of requests: shares of one card, whole and multi-card pods, CPU-only
// pods, gpu_spec lists, and CPU and memory large enough to bind.
func randomInstance(rng *rand.Rand) ([]sim.Node, []sim.Pod) {
	pick := func(xs ...int64) int64 { return xs[rng.Intn(len(xs))] }
	models := []string{"A", "B"}
	var nodes []sim.Node
	for i := range 1 + rng.Intn(3) {
		nodes = append(nodes, sim.Node{
			Name:   string(rune('a' + i)),
			CPU:    pick(4000, 8000, 16000),
			Memory: pick(16384, 65536),
			GPUs:   int(pick(1, 2, 4)),
			Model:  models[rng.Intn(2)],
		})
	}
	var pods []sim.Pod
	for i := range 4 + rng.Intn(5) {
		p := sim.Pod{Name: string(rune('p' + i)), CPU: pick(1000, 2000, 4000, 6000, 9000), Memory: pick(1024, 8192, 30000)}
		switch r := rng.Intn(10); {
		case r < 6:
			p.NumGPU, p.Milli = 1, pick(110, 160, 230, 320, 470, 500, 550, 650, 810, 1000)
		case r < 9:
			p.NumGPU, p.Milli = int(pick(2, 3, 4)), sim.MilliPerGPU
		}
		switch rng.Intn(6) {
		case 0:
			p.Spec = []string{"A"}
		case 1:
			p.Spec = []string{"B"}
		case 2:
			p.Spec = []string{"A", "B"}
		}
		pods = append(pods, p)
	}
	return nodes, pods
}

// TestPackBoundAboveOptimum checks the relaxation against exhaustive
// search on random small instances: never below the best packing, never
// above what arrived or the capacity. It would fail on an invalid cut.
func TestPackBoundAboveOptimum(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	exact := 0
	const n = 400
	for i := range n {
		nodes, pods := randomInstance(rng)
		opt := optimum(nodes, pods)
		got, err := packBound(nodes, pods)
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		var arrived, capacity int64
		for _, p := range pods {
			arrived += p.GPUMilli()
		}
		for _, nd := range nodes {
			capacity += int64(nd.GPUs) * sim.MilliPerGPU
		}
		if got < opt || got > arrived || got > capacity {
			t.Errorf("instance %d: bound %d, want between the optimum %d and min(arrived %d, capacity %d)\nnodes %+v\npods %+v",
				i, got, opt, arrived, capacity, nodes, pods)
		}
		if got == opt {
			exact++
		}
	}
	t.Logf("bound equal to the optimum on %d of %d random instances", exact, n)
}

// TestPackBoundExact checks instances where the relaxation with its cuts
// is exact, each needing one kind of row: without it the bound would be
// higher (shown by "plain", the value with only the sums).
func TestPackBoundExact(t *testing.T) {
	share := func(milli, cpu int64, spec ...string) sim.Pod {
		return sim.Pod{CPU: cpu, Memory: 1024, NumGPU: 1, Milli: milli, Spec: spec}
	}
	whole := func(k int, spec ...string) sim.Pod {
		return sim.Pod{CPU: 1000, Memory: 1024, NumGPU: k, Milli: sim.MilliPerGPU, Spec: spec}
	}
	node := func(gpus int, cpu int64, model string) sim.Node {
		return sim.Node{CPU: cpu, Memory: 65536, GPUs: gpus, Model: model}
	}
	tests := []struct {
		name  string
		nodes []sim.Node
		pods  []sim.Pod
		want  int64
	}{
		{
			// Each pod takes more than half the node's CPU: one fits.
			name:  "CPU, one pod above half the node",
			nodes: []sim.Node{node(1, 8000, "A")},
			pods:  []sim.Pod{share(500, 6000), share(500, 6000), share(500, 6000)},
			want:  500,
		},
		{
			// An 810 share keeps a card to itself but for 190 milli.
			name:  "card, u^ε: one share above 500 per card",
			nodes: []sim.Node{node(1, 64000, "A")},
			pods:  []sim.Pod{share(810, 1000), share(810, 1000), share(160, 1000)},
			want:  970,
		},
		{
			// Two 470 shares fill a card; a third cannot join them.
			name:  "card, f^(2): two 470 shares per card",
			nodes: []sim.Node{node(1, 64000, "A")},
			pods:  []sim.Pod{share(470, 1000), share(470, 1000), share(470, 1000)},
			want:  940,
		},
		{
			name:  "node cards: one 5-card pod per 8-card node",
			nodes: []sim.Node{node(8, 64000, "A")},
			pods:  []sim.Pod{whole(5), whole(5)},
			want:  5000,
		},
		{
			name:  "gpu_spec: pods only for model A",
			nodes: []sim.Node{node(1, 64000, "A"), node(2, 64000, "B")},
			pods:  []sim.Pod{whole(1, "A"), whole(1, "A"), whole(1, "A")},
			want:  1000,
		},
		{
			name:  "multi-card pod needs a node with enough cards",
			nodes: []sim.Node{node(1, 64000, "A"), node(1, 64000, "A")},
			pods:  []sim.Pod{whole(2), share(300, 1000)},
			want:  300,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := range tc.pods {
				tc.pods[i].Name = string(rune('p' + i))
			}
			if opt := optimum(tc.nodes, tc.pods); opt != tc.want {
				t.Fatalf("exhaustive optimum %d, the test expects %d", opt, tc.want)
			}
			got, err := packBound(tc.nodes, tc.pods)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("packBound = %d, want the optimum %d", got, tc.want)
			}
		})
	}
}

// arrivalList draws pods like randomInstance's until exactly 100% and
// then exactly 130% of capacity arrived (the last pod before each point
// sized to land on it), so that both bins have events.
func arrivalList(rng *rand.Rand, capacity int64) []sim.Pod {
	var pods []sim.Pod
	var tot int64
	for _, target := range []int64{capacity, capacity * 13 / 10} {
		for tot < target {
			_, ps := randomInstance(rng)
			p := ps[0]
			p.Name = string(rune('p' + len(pods)))
			if tot+p.GPUMilli() > target {
				p.NumGPU, p.Milli = 1, min(target-tot, sim.MilliPerGPU)
			}
			tot += p.GPUMilli()
			pods = append(pods, p)
		}
	}
	return pods
}

// TestBoundArrivalsAboveOptimum checks the bound at 100% and 130% against
// the exhaustive optimum of every arrival prefix put through Curve.At, on
// random arrival lists for random small clusters.
func TestBoundArrivalsAboveOptimum(t *testing.T) {
	smallArrivalLists(rand.New(rand.NewSource(2)), 60, func(i int, tr *sim.Trace, pods []sim.Pod) {
		nodes, gpus := tr.Nodes, tr.Capacity()/sim.MilliPerGPU
		best := make(sim.Curve, len(pods))
		var arrived int64
		for k := range pods {
			arrived += pods[k].GPUMilli()
			best[k] = sim.NewEvent(arrived, optimum(nodes, pods[:k+1]), gpus)
		}
		b, err := boundArrivals(tr, pods)
		if err != nil {
			t.Fatalf("instance %d: %v", i, err)
		}
		if o := best.At(100); o > b.Alloc100 {
			t.Errorf("instance %d: optimum %.2f%% at 100%% arrival, above the bound %.2f%%\nnodes %+v\npods %+v", i, o, b.Alloc100, nodes, pods)
		}
		if o := best.At(sim.MaxArrival); o > b.Alloc130 {
			t.Errorf("instance %d: optimum %.2f%% at 130%% arrival, above the bound %.2f%%\nnodes %+v\npods %+v", i, o, b.Alloc130, nodes, pods)
		}
	})
}

// smallArrivalLists calls f for each of n random small clusters that has
// at most 4 cards (so that exhaustive search stays short) with an arrival
// list for it through 100% and 130% of its capacity (arrivalList), in
// the order rng draws them.
func smallArrivalLists(rng *rand.Rand, n int, f func(i int, tr *sim.Trace, pods []sim.Pod)) {
	for i := range n {
		nodes, _ := randomInstance(rng)
		tr := &sim.Trace{Name: "random", Nodes: nodes}
		if tr.Capacity()/sim.MilliPerGPU > 4 {
			continue
		}
		f(i, tr, arrivalList(rng, tr.Capacity()))
	}
}

func TestEventsFor(t *testing.T) {
	c := sim.Curve{{Arrived: 98}, {Arrived: 99}, {Arrived: 99}, {Arrived: 101}, {Arrived: 103}}
	tests := []struct {
		a, first, last int
	}{
		{a: 99, first: 1, last: 2},  // the bin's events
		{a: 100, first: 1, last: 3}, // empty bin: those of 99..101
		{a: 102, first: 3, last: 4}, // empty bin: those of 101..103
		{a: 105, first: -1, last: -1},
	}
	for _, tc := range tests {
		if first, last := eventsFor(c, tc.a); first != tc.first || last != tc.last {
			t.Errorf("eventsFor(%d) = %d, %d, want %d, %d", tc.a, first, last, tc.first, tc.last)
		}
	}
}

// TestPackBoundErrors checks that a pod asking for more than a card is an
// error, not a bound.
func TestPackBoundErrors(t *testing.T) {
	nodes := []sim.Node{{Name: "a", CPU: 8000, Memory: 65536, GPUs: 1, Model: "A"}}
	bad := []sim.Pod{{Name: "bad", NumGPU: 1, Milli: 1200}}
	if _, err := packBound(nodes, bad); err == nil {
		t.Error("packBound with gpu_milli 1200: want an error")
	}
}
