#!/bin/sh
# The measurements docs/quality.md quotes beside the 24-trace table
# ("One code path"), written with how and where they were made to
# $QUALITY_OUT/quality-extra.txt (bench/results):
#   1. the ablation: fragment against fragment-gpu-only (pods without vGPUs
#      unscored, the plugin's old behaviour), five tuning traces, seeds 42-51;
#   2. BenchmarkAllocateNoDevicePods: what scoring those pods costs in
#      Volcano's allocate action (noop, binpack, fragment), count 3;
#   3. BenchmarkShippedConfPlacement: the shipped volcano-scheduler.conf
#      (nodeorder and binpack add their scores) against the plugin deciding
#      alone, on 35-node trace samples, seeds 42-44.
# About 15 minutes on two idle cores, most of it part 3.
set -eu

GO=${GO:-go}
DIR=${QUALITY_TRACE_DIR:-bench/testdata/openb}
OUT=${QUALITY_OUT:-bench/results}
mkdir -p "$OUT"
f="$OUT/quality-extra.txt"
. hack/provenance.sh
{
	echo "# hack/quality-extra.sh (make quality-extra); regenerate, do not edit"
	provenance
} >"$f"

run() {
	echo "" >>"$f"
	echo "\$ $*" >>"$f"
	echo "\$ $*" >&2
	"$@" 2>/dev/null | grep -v '^[IWE][0-9]\{4\} ' >>"$f"
}

run "$GO" run ./bench/quality/cmd/quality --trace-dir "$DIR" --traces tuning \
	--policies fragment,fragment-gpu-only --seeds 42-51 --parallel 2
run "$GO" test -run '^$' -bench '^BenchmarkAllocateNoDevicePods$' -benchtime 1x -count 3 -timeout 0 ./deviceshare/
run "$GO" test -run '^$' -bench '^BenchmarkShippedConfPlacement$' -benchtime 3x -timeout 0 ./deviceshare/
echo "wrote $f" >&2
