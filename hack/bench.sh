#!/usr/bin/env bash
# In-process benchmarks: Volcano's allocate action over one session with
# Volcano v1.10.0's built-in deviceshare and with ours, side by side on the
# same clusters, pods and plugin sets; then the per-backend micro benchmarks.
# benchstat compares the two implementations column by column.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${BENCHSTAT:=benchstat}"
: "${BENCH_COUNT:=3}"
out=${BENCH_OUT:-_output/bench}
mkdir -p "$out"

echo "== allocate action, built-in vs ours (count=$BENCH_COUNT; BENCH_NODES=${BENCH_NODES:-100,1000}) =="
go test -run '^$' -bench 'BenchmarkAllocateGPUShare' -benchtime 1x -count "$BENCH_COUNT" ./deviceshare/ 2>/dev/null \
	| grep -E '^(Benchmark|goos|goarch|pkg|cpu)' | tee "$out/allocate.txt"
"$BENCHSTAT" -col /impl "$out/allocate.txt" | tee "$out/allocate.benchstat"

echo "== pods/s ratio (ours / built-in, mean of runs) =="
awk '
/^BenchmarkAllocateGPUShare/ {
	split($1, parts, "/"); key = parts[2] "/" parts[3]; impl = parts[4]; sub(/-[0-9]+$/, "", impl)
	for (i = 1; i <= NF; i++) if ($(i) == "pods/s") { sum[key, impl] += $(i-1); n[key, impl]++ }
	keys[key] = 1
}
END {
	for (k in keys) {
		b = sum[k, "impl=builtin"] / n[k, "impl=builtin"]; o = sum[k, "impl=ours"] / n[k, "impl=ours"]
		printf "%-28s built-in %8.1f pods/s   ours %8.1f pods/s   ratio %.2fx\n", k, b, o, o / b
	}
}' "$out/allocate.txt" | sort | tee "$out/ratio.txt"

echo "== backend micro benchmarks =="
go test -run '^$' -bench . -benchmem -count "$BENCH_COUNT" ./backends/... | tee "$out/backends.txt" | grep -E '^Benchmark'
