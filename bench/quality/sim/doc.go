// Package sim is the placement-quality simulator's core, below the
// policies, the bound and the reports of package quality: the openb trace
// (trace.go: nodes and pods, LoadTrace; trace_files.go: explicit paths),
// one seed's arrivals (arrival.go: Arrange, Go math/rand v1 draws exactly
// as QUALITY.md specifies, so that seeds 42..51 reproduce the published
// arrival lists), the cluster a run places pods on (cluster.go: free CPU,
// memory and card milli per node, rank tie-breaks, the GpuClustering tags
// the Cluster keeps for that policy), the allocation curve and its binned
// metric (metric.go: Event, Curve.At, Python-compatible rounding), and the
// run itself (run.go: Policy, Factory, Run, Placements, Evaluate, Result).
//
// It knows no policy: a Policy is anything that picks a node and cards
// for an arriving pod, and the simulator checks and applies the choice.
// Package quality implements the policies and re-exports these names
// (quality.Trace is sim.Trace), so most callers need not import sim.
package sim
