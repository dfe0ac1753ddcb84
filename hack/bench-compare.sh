#!/usr/bin/env bash
# bench-compare runs the in-process vGPU benchmark (BenchmarkAllocateVGPU,
# deviceshare/bench_vgpu_test.go) built at BASE and at the working tree, in
# one invocation, round by round (base then head for every implementation),
# so that a refactoring's cost or gain is read beside a baseline that ran
# minutes, not days, apart. Implementations are renamed impl@base and
# impl@head for benchstat. Output (command, commit, date, machine, results):
# bench/results/bench-compare.txt.
#
# Knobs: BASE (required: a commit), BENCH_COMPARE_OUT (the file under
# BENCH_RESULTS, bench-compare.txt), BENCH_COMPARE_COUNT (3 rounds),
# BENCH_COMPARE_BENCH (the -test.bench pattern, BenchmarkAllocateVGPU$; for
# another benchmark whose sub-benchmarks end in impl=<impl>, name them, e.g.
# 'BenchmarkAllocateGPUShare$/plugins=device/nodes=1000/impl=ours$' with
# BENCH_VGPU_IMPLS=ours),
# BENCH_VGPU_NODES (1000), BENCH_VGPU_PODS (10000), BENCH_VGPU_IMPLS
# (noop,ours,ours-fragment), BENCH_RESULTS (bench/results).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
: "${BENCHSTAT:=benchstat}"
: "${BASE:?set BASE to the commit to compare with}"
: "${BENCH_COMPARE_COUNT:=3}"
: "${BENCH_VGPU_NODES:=1000}"
: "${BENCH_VGPU_PODS:=10000}"
: "${BENCH_VGPU_IMPLS:=noop,ours,ours-fragment}"
: "${BENCH_COMPARE_BENCH:=BenchmarkAllocateVGPU\$}"
out=${BENCH_RESULTS:-bench/results}
mkdir -p "$out"
f="$out/${BENCH_COMPARE_OUT:-bench-compare.txt}"
source hack/provenance.sh
tmp=$(mktemp -d)
trap 'git worktree remove --force "$tmp/base" >/dev/null 2>&1 || true; rm -rf "$tmp"' EXIT
base=$(git rev-parse --short "$BASE")
git worktree add --detach "$tmp/base" "$base" >/dev/null
(cd "$tmp/base" && $GO test -c -o "$tmp/base.test" ./deviceshare/)
$GO test -c -o "$tmp/head.test" ./deviceshare/
{
	echo "# command: make bench-compare BASE=$BASE (hack/bench-compare.sh)"
	echo "# knobs: BENCH_COMPARE_BENCH=$BENCH_COMPARE_BENCH BENCH_COMPARE_COUNT=$BENCH_COMPARE_COUNT BENCH_VGPU_NODES=$BENCH_VGPU_NODES BENCH_VGPU_PODS=$BENCH_VGPU_PODS BENCH_VGPU_IMPLS=$BENCH_VGPU_IMPLS"
	provenance
	echo "# base: $base; head: the working tree at $(git rev-parse --short HEAD)$(git diff --quiet || echo ' (modified)')"
	echo "# each binary: go test -c ./deviceshare/; then $BENCH_COMPARE_COUNT rounds of, per implementation, base then head:" \
		"BENCH_NODES=$BENCH_VGPU_NODES BENCH_PODS=$BENCH_VGPU_PODS BENCH_IMPLS=<impl>" \
		"deviceshare.test -test.run '^\$' -test.bench '$BENCH_COMPARE_BENCH' -test.benchtime 1x -test.count 1 -test.timeout 0"
} >"$f"
raw=$(mktemp)
for round in $(seq "$BENCH_COMPARE_COUNT"); do
	echo "# round $round: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$f"
	for impl in ${BENCH_VGPU_IMPLS//,/ }; do
		for side in base head; do
			(cd deviceshare && BENCH_NODES=$BENCH_VGPU_NODES BENCH_PODS=$BENCH_VGPU_PODS BENCH_IMPLS=$impl \
				"$tmp/$side.test" -test.run '^$' -test.bench "$BENCH_COMPARE_BENCH" -test.benchtime 1x -test.count 1 \
				-test.timeout 0 2>/dev/null) | awk -f hack/bench-lines.awk | sed "s/impl=$impl-/impl=$impl@$side-/" |
				tee -a "$raw" >>"$f"
		done
	done
done
{
	echo "## benchstat -col /impl"
	"$BENCHSTAT" -col /impl "$raw"
} | tee -a "$f"
rm -f "$raw"
