package sim

import "fmt"

// NodeState is one node's free resources during a run.
type NodeState struct {
	// CPU (milli-cores) and Memory (MiB) still free.
	CPU, Memory int64
	// Free is every card's free milli, by card index.
	Free []int64
	// Model is the card model.
	Model string
	// Version changes whenever a pod is placed on the node, so policies
	// may memoise per-node results.
	Version uint64
	// tags counts the node's GPU pods by GpuClustering tag.
	tags    map[string]int
	gpuPods int
}

// Idle is the node's total free GPU milli.
func (n *NodeState) Idle() int64 {
	var s int64
	for _, f := range n.Free {
		s += f
	}
	return s
}

// GPUPods is how many GPU pods the node holds.
func (n *NodeState) GPUPods() int { return n.gpuPods }

// TagPods is how many of the node's GPU pods have GpuClustering tag tag
// (ClusterTag).
func (n *NodeState) TagPods(tag string) int { return n.tags[tag] }

// Cluster is the state of every node during one run, in node name order.
type Cluster struct {
	Nodes []NodeState
	// Rank breaks ties between nodes: the smaller rank wins.
	Rank []int
	// Used is the allocated GPU milli.
	Used int64
}

// NewCluster returns the empty cluster of the trace's nodes.
func NewCluster(t *Trace, rank []int) *Cluster {
	c := &Cluster{Nodes: make([]NodeState, len(t.Nodes)), Rank: rank}
	for i, n := range t.Nodes {
		free := make([]int64, n.GPUs)
		for g := range free {
			free[g] = MilliPerGPU
		}
		c.Nodes[i] = NodeState{CPU: n.CPU, Memory: n.Memory, Free: free, Model: n.Model, tags: map[string]int{}}
	}
	return c
}

// FitsHost reports whether the node has the pod's CPU and memory free and
// a model the pod accepts (GPU pods only): the part of feasibility every
// policy, ours included, leaves to the simulator.
func (c *Cluster) FitsHost(n int, p *Pod) bool {
	s := &c.Nodes[n]
	if s.CPU < p.CPU || s.Memory < p.Memory {
		return false
	}
	return p.NumGPU == 0 || p.Accepts(s.Model)
}

// FitsGPU reports whether the node has NumGPU cards with Milli free each.
func (c *Cluster) FitsGPU(n int, p *Pod) bool {
	if p.NumGPU == 0 {
		return true
	}
	k := 0
	for _, f := range c.Nodes[n].Free {
		if f >= p.Milli {
			k++
		}
	}
	return k >= p.NumGPU
}

// Feasible is FitsHost and FitsGPU: the reference policies' feasibility.
func (c *Cluster) Feasible(n int, p *Pod) bool { return c.FitsHost(n, p) && c.FitsGPU(n, p) }

// Better reports whether node a with score sa beats the best so far, b
// with score sb (b < 0: none yet): higher score, then smaller rank.
func (c *Cluster) Better(a int, sa float64, b int, sb float64) bool {
	return b < 0 || sa > sb || sa == sb && c.Rank[a] < c.Rank[b]
}

// Place takes the pod's resources on node n and cards gpus.
func (c *Cluster) Place(n int, gpus []int, p *Pod) error {
	s := &c.Nodes[n]
	if len(gpus) != p.NumGPU {
		return fmt.Errorf("place pod %s on node %d: %d cards chosen for %d asked", p.Name, n, len(gpus), p.NumGPU)
	}
	if s.CPU < p.CPU || s.Memory < p.Memory {
		return fmt.Errorf("place pod %s on node %d: CPU or memory overcommitted", p.Name, n)
	}
	for i, g := range gpus {
		if g < 0 || g >= len(s.Free) || s.Free[g] < p.Milli {
			return fmt.Errorf("place pod %s on node %d: card %d lacks %d milli", p.Name, n, g, p.Milli)
		}
		for _, h := range gpus[:i] {
			if h == g {
				return fmt.Errorf("place pod %s on node %d: card %d chosen twice", p.Name, n, g)
			}
		}
	}
	s.CPU -= p.CPU
	s.Memory -= p.Memory
	for _, g := range gpus {
		s.Free[g] -= p.Milli
	}
	c.Used += p.GPUMilli()
	if p.NumGPU > 0 {
		s.tags[ClusterTag(p)]++
		s.gpuPods++
	}
	s.Version++
	return nil
}

// ClusterTag is GpuClustering's pod class: "share-gpu" for a share of one
// card, "<k>-gpu" for k whole cards.
func ClusterTag(p *Pod) string {
	if p.Milli < MilliPerGPU {
		return "share-gpu"
	}
	return fmt.Sprintf("%d-gpu", p.NumGPU)
}

// BestFitCard returns the card with the least free milli that still has
// milli free, the lowest index on ties; -1 when none.
func BestFitCard(free []int64, milli int64) int {
	best := -1
	for g, f := range free {
		if f >= milli && (best < 0 || f < free[best]) {
			best = g
		}
	}
	return best
}
