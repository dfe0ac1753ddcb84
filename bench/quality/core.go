package quality

import "github.com/vgpushare/vshare/bench/quality/sim"

// The simulator's vocabulary lives in package sim, below the policies,
// the bound and the reports; these aliases let the policies here and the
// callers of this package keep writing quality.Trace, quality.Run and so
// on. They add nothing: see package sim for each one's documentation.
type (
	// Node is sim.Node, one GPU node of a trace.
	Node = sim.Node
	// Pod is sim.Pod, one pod of a trace.
	Pod = sim.Pod
	// Trace is sim.Trace, an openb node list and pod list.
	Trace = sim.Trace
	// Arrivals is sim.Arrivals, one seed's arrival order and node ranks.
	Arrivals = sim.Arrivals
	// NodeState is sim.NodeState, one node's free resources during a run.
	NodeState = sim.NodeState
	// Cluster is sim.Cluster, every node's state during a run.
	Cluster = sim.Cluster
	// Event is sim.Event, the cluster after one arrival.
	Event = sim.Event
	// Curve is sim.Curve, one run's events.
	Curve = sim.Curve
	// Policy is sim.Policy, what places arriving pods.
	Policy = sim.Policy
	// Env is sim.Env, what a policy may know when it is created.
	Env = sim.Env
	// Factory is sim.Factory, which creates a policy for one run.
	Factory = sim.Factory
	// Placement is sim.Placement, one arrival's outcome.
	Placement = sim.Placement
	// Result is sim.Result, a policy's allocation averaged over seeds.
	Result = sim.Result
)

const (
	// MilliPerGPU is sim.MilliPerGPU, one whole GPU in gpu_milli.
	MilliPerGPU = sim.MilliPerGPU
	// MaxArrival is sim.MaxArrival, the last arrival percentage.
	MaxArrival = sim.MaxArrival
)

// LoadTrace is sim.LoadTrace: the GPU node list and the named pod list
// from dir.
func LoadTrace(dir, trace string) (*Trace, error) { return sim.LoadTrace(dir, trace) }

// LoadTraceFiles is sim.LoadTraceFiles: a node list and a pod list from
// explicit paths.
func LoadTraceFiles(nodesPath, podsPath string) (*Trace, error) {
	return sim.LoadTraceFiles(nodesPath, podsPath)
}

// TraceName is sim.TraceName: the trace name of a pod list file.
func TraceName(podsPath string) string { return sim.TraceName(podsPath) }

// Arrange is sim.Arrange: one seed's arrivals and node ranks.
func Arrange(t *Trace, seed int64) *Arrivals { return sim.Arrange(t, seed) }

// NewCluster is sim.NewCluster: the empty cluster of the trace's nodes.
func NewCluster(t *Trace, rank []int) *Cluster { return sim.NewCluster(t, rank) }

// Run is sim.Run: one seed's allocation after every arrival.
func Run(t *Trace, f Factory, seed int64) (Curve, error) { return sim.Run(t, f, seed) }

// Placements is sim.Placements: one seed's arrivals and where each went.
func Placements(t *Trace, f Factory, seed int64) (*Arrivals, []Placement, error) {
	return sim.Placements(t, f, seed)
}

// Evaluate is sim.Evaluate: every seed run and the values averaged.
func Evaluate(t *Trace, policy string, f Factory, seeds []int64) (*Result, error) {
	return sim.Evaluate(t, policy, f, seeds)
}
