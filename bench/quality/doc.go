// Package quality is the placement-quality simulator of the FGD methodology
// (ATC'23, "Beware of Fragmentation"): Alibaba's openb pods arrive on its
// 1213 GPU nodes until 130% of the cluster's GPU capacity has been asked
// for, and the GPU allocation ratio is recorded after every arrival.
//
// The experiment follows the team's QUALITY.md specification (summarised
// in docs/quality.md) to the letter: seeded arrival order and inflation
// (Go math/rand v1), node ranks that break ties, the six reference
// policies (Random, DotProd, BestFit, GpuPacking, GpuClustering, FGD) with
// their integer-truncated scores, and the binned allocation metric. The reference policies exist to prove the simulator
// faithful: their seed-42 values are tested exactly against the published
// numbers.
//
// Our policies (binpack, spread, fragment) place pods through the real
// HAMi vGPU backend (backends/vgpu): every node becomes a *v1.Node with a
// volcano.sh/node-vgpu-register annotation, every pod a *v1.Pod asking for
// volcano.sh/vgpu-number, -cores and -memory-percentage, and the backend's
// FilterNode, ScoreNode and Allocate decide per-card fit, the node score and
// the cards taken. The simulator checks CPU and memory itself, as
// Kubernetes' own resource fit would.
//
// Volcano v1.10.0's built-in vGPU device (policies volcano-builtin,
// volcano-builtin-binpack and volcano-builtin-spread, builtin.go) places the
// same pods as Volcano's deviceshare and predicates plugins drive it:
// FilterNode, ScoreNode, then Allocate, whose pod PATCH goes to an
// in-memory clientset (builtin_client.go), and AddResource of the
// patched pod on the node's devices, as the scheduler cache does.
//
// Tests read the openb trace committed in bench/testdata/openb
// (TestVendoredTrace checks it against its SHA256SUMS). The full-trace
// checks skip under -race; `make quality-check`, part of `make test`, runs
// the seed-42 ones without it and with VSHARE_QUALITY_REQUIRED=1, which
// turns their skips into failures.
//
// Reporting: AllTraces lists the 24 openb pod lists, TuningTraces the five
// the policies were developed on. Evaluate keeps every seed's values in the
// Result; stats.go gives the seed spread (sample sd, Student-t 95% interval)
// and Paired the per-seed differences of two policies, from which
// compare.go decides "below by more than the seed spread" (the paired
// interval excludes 0). csv.go writes quality.csv (six core columns, then
// appended ones), markdown.go the per-trace tables and their computed
// summary lines, svg24.go the plot across the traces.
//
// UpperBound and OfflinePacking, the two ends of what any placement could
// reach, live in package bound (see its doc.go); bound.go here wraps them
// with the fragment policy as the online policy the offline placements
// start from. Limit carries both into the report (bound_report.go), and
// OfflineFactory lets cmd/modelmix show the placement kept.
//
// Layout. Package sim (trace reading, arrivals, the simulated cluster,
// the allocation curve, Run, Evaluate and Result) is the bottom; package
// bound (the LP/packing upper bound and the offline packing) sits on it;
// this package holds the policies (baselines.go, fgd.go, vgpu.go,
// builtin.go; FactoryFor in run.go), the trace sets, the seed statistics
// and comparisons and the reports (csv.go, markdown.go, svg.go, svg24.go,
// bound_report.go), and imports both. Neither imports this package; core.go
// re-exports sim's types and functions so that callers keep writing
// quality.Trace, quality.Run and quality.Result.
package quality
