#!/usr/bin/env bash
# make bench-profile: where ours' session time goes against the floor.
# Runs BenchmarkAllocateVGPU once for impl=noop and once for impl=ours (10,000
# pods, BENCH_PROFILE_NODES nodes, default 1000) with a CPU profile each, and
# writes to bench/results/vgpu-profile.txt: command, commit, date, machine,
# both benchmark lines, the top functions of ours' profile by cumulative
# time, and the difference ours minus noop (pprof -diff_base), which is the
# device work and everything Volcano does because of it; then the same for
# allocations (a memory profile of each run, ours minus noop by objects
# allocated).
#
# BENCH_PROFILE_BASE (noop) names the baseline: with floor (the cheapest
# device check, issue 36) the output is vgpu-profile-floor.txt.
# BENCH_PROFILE_WORKLOAD (anonymous) picks the workload (anonymous or jobs;
# another than anonymous adds its name to the file's).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
: "${BENCH_PROFILE_NODES:=1000}"
: "${BENCH_PROFILE_PODS:=10000}"
: "${BENCH_PROFILE_BASE:=noop}"
: "${BENCH_PROFILE_WORKLOAD:=anonymous}"
name=vgpu-profile
[[ $BENCH_PROFILE_BASE == noop ]] || name+=-$BENCH_PROFILE_BASE
[[ $BENCH_PROFILE_WORKLOAD == anonymous ]] || name+=-$BENCH_PROFILE_WORKLOAD
out=${BENCH_RESULTS:-bench/results}/$name.txt
base=$BENCH_PROFILE_BASE
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source hack/provenance.sh
{
	echo "# command: make bench-profile (hack/bench-profile.sh), BENCH_PROFILE_NODES=$BENCH_PROFILE_NODES BENCH_PROFILE_PODS=$BENCH_PROFILE_PODS" \
		"BENCH_PROFILE_BASE=$base BENCH_PROFILE_WORKLOAD=$BENCH_PROFILE_WORKLOAD"
	provenance
	$GO test -c -o "$tmp/ds.test" ./deviceshare/
	for impl in "$base" ours; do
		echo
		echo "## impl=$impl: BENCH_NODES=$BENCH_PROFILE_NODES BENCH_PODS=$BENCH_PROFILE_PODS BENCH_IMPLS=$impl BENCH_WORKLOAD=$BENCH_PROFILE_WORKLOAD deviceshare.test -test.bench 'BenchmarkAllocateVGPU\$' -test.benchtime 1x -test.cpuprofile -test.memprofile"
		BENCH_NODES=$BENCH_PROFILE_NODES BENCH_PODS=$BENCH_PROFILE_PODS BENCH_IMPLS=$impl BENCH_WORKLOAD=$BENCH_PROFILE_WORKLOAD \
			"$tmp/ds.test" -test.run '^$' -test.bench 'BenchmarkAllocateVGPU$' -test.benchtime 1x -test.timeout 0 \
			-test.cpuprofile "$tmp/$impl.cpu" -test.memprofile "$tmp/$impl.mem" 2>/dev/null | grep -E '^Benchmark' | tr -s ' \t' ' '
	done
	echo
	echo "## impl=ours: top 40 by cumulative CPU time"
	$GO tool pprof -top -cum -nodecount=40 "$tmp/ds.test" "$tmp/ours.cpu" 2>/dev/null | sed -n '/flat%/,$p'
	echo
	echo "## ours minus $base (pprof -diff_base $base): top 40 by cumulative CPU time"
	$GO tool pprof -top -cum -nodecount=40 -diff_base "$tmp/$base.cpu" "$tmp/ds.test" "$tmp/ours.cpu" 2>/dev/null | sed -n '/^Duration\|Total samples/p;/flat%/,$p'
	echo
	echo "## allocations, ours minus $base (pprof -sample_index=alloc_objects -diff_base $base): top 20 by objects allocated"
	$GO tool pprof -sample_index=alloc_objects -top -nodecount=20 -diff_base "$tmp/$base.mem" "$tmp/ds.test" "$tmp/ours.mem" 2>/dev/null | sed -n '/flat%/,$p'
} > "$out"
echo "wrote $out"
