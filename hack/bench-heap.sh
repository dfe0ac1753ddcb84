#!/usr/bin/env bash
# make bench-heap: what ours holds beyond the floor at its peak (issue 36).
# Runs one 10,000-pod session of BenchmarkAllocateVGPU at 1,000 nodes for
# impl=floor and impl=ours with BENCH_HEAPPROFILE (a heap profile after the
# allocate action, before the session closes, after a collection: the live
# objects of the session at its largest) and -test.memprofile (everything
# allocated over the run), both at -test.memprofilerate 4096 so that small
# per-pod objects are sampled. With BASE set it also runs impl=ours built at
# BASE (the working tree's benchmark files copied over BASE's, so an older
# commit gets the BENCH_HEAPPROFILE hook; they must still compile there):
# "before" is ours@BASE minus the floor, "after" ours at the working tree
# minus the floor, side by side in one invocation.
#
# Writes bench/results/vgpu-heap.txt (or BENCH_HEAP_OUT): command, commit,
# date, machine, the benchmark lines (live-heap-MB and peak-heap-MB), each
# profile's top entries by inuse_space, and ours minus the floor by
# inuse_space and by alloc_space (pprof -diff_base).
#
# Knobs: BASE (none), BENCH_HEAP_NODES (1000), BENCH_HEAP_PODS (10000),
# BENCH_HEAP_WORKLOAD (anonymous), BENCH_HEAP_TOP (25 entries), BENCH_RESULTS.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
: "${BENCH_HEAP_NODES:=1000}"
: "${BENCH_HEAP_PODS:=10000}"
: "${BENCH_HEAP_WORKLOAD:=anonymous}"
: "${BENCH_HEAP_TOP:=25}"
out=${BENCH_RESULTS:-bench/results}/${BENCH_HEAP_OUT:-vgpu-heap.txt}
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
source hack/provenance.sh

# run <binary> <label> <impl>: one profiled session.
run() {
	echo "## $2: BENCH_NODES=$BENCH_HEAP_NODES BENCH_PODS=$BENCH_HEAP_PODS BENCH_IMPLS=$3 BENCH_WORKLOAD=$BENCH_HEAP_WORKLOAD" \
		"BENCH_HEAPPROFILE=$2 deviceshare.test -test.bench 'BenchmarkAllocateVGPU\$' -test.benchtime 1x" \
		"-test.memprofilerate 4096 -test.memprofile $2.alloc ($(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg))"
	(cd deviceshare && BENCH_NODES=$BENCH_HEAP_NODES BENCH_PODS=$BENCH_HEAP_PODS BENCH_IMPLS=$3 BENCH_WORKLOAD=$BENCH_HEAP_WORKLOAD \
		BENCH_HEAPPROFILE="$tmp/$2" "$1" -test.run '^$' -test.bench 'BenchmarkAllocateVGPU$' -test.benchtime 1x \
		-test.timeout 0 -test.memprofilerate 4096 -test.memprofile "$tmp/$2.alloc" 2>/dev/null) |
		awk -f hack/bench-lines.awk | grep -E '^Benchmark' | tr -s ' \t' ' '
	mv "$tmp/$2-$3.heap" "$tmp/$2.heap"
}

# top <title> <pprof args...>: pprof's table without its header.
top() {
	echo
	echo "## $1"
	shift
	$GO tool pprof -top -nodecount="$BENCH_HEAP_TOP" "$@" 2>/dev/null | sed -n '/^Showing nodes/p;/flat%/,$p'
}

{
	echo "# command: make bench-heap${BASE:+ BASE=$BASE} (hack/bench-heap.sh), BENCH_HEAP_NODES=$BENCH_HEAP_NODES" \
		"BENCH_HEAP_PODS=$BENCH_HEAP_PODS BENCH_HEAP_WORKLOAD=$BENCH_HEAP_WORKLOAD"
	provenance
	$GO test -c -o "$tmp/head.test" ./deviceshare/
	labels=(floor ours)
	if [[ -n ${BASE:-} ]]; then
		base=$(git rev-parse --short "$BASE")
		echo "# base: $base, with the working tree's deviceshare/bench_*_test.go"
		git worktree add --detach "$tmp/base" "$base" >/dev/null
		cp deviceshare/bench_*_test.go "$tmp/base/deviceshare/"
		(cd "$tmp/base" && $GO test -c -o "$tmp/base.test" ./deviceshare/)
		labels=(floor ours-base ours)
	fi
	echo
	run "$tmp/head.test" floor floor
	[[ -z ${BASE:-} ]] || run "$tmp/base.test" ours-base ours
	run "$tmp/head.test" ours ours
	for l in "${labels[@]}"; do
		top "$l: live objects after allocate (inuse_space)" -sample_index=inuse_space "$tmp/head.test" "$tmp/$l.heap"
	done
	for l in "${labels[@]:1}"; do
		top "$l minus floor: live objects after allocate (inuse_space, -diff_base floor)" -sample_index=inuse_space \
			-diff_base "$tmp/floor.heap" "$tmp/head.test" "$tmp/$l.heap"
		top "$l minus floor, by cumulative: live objects after allocate (inuse_space, -diff_base floor)" -cum \
			-sample_index=inuse_space -diff_base "$tmp/floor.heap" "$tmp/head.test" "$tmp/$l.heap"
		top "$l minus floor: allocated over the run (alloc_space, -diff_base floor)" -sample_index=alloc_space \
			-diff_base "$tmp/floor.alloc" "$tmp/head.test" "$tmp/$l.alloc"
	done
} >"$out"
echo "wrote $out"
