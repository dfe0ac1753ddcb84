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

# vGPU at scale: 10,000 mixed pods (fractions and 1-8 card pods) on 1000 and
# 5000 nodes of 8 cards. The built-in runs unthrottled (its pod patch answered
# in memory; as shipped it is capped at 5 patches/s); noop is the session's
# cost without any device plugin work and its cb-us/pod the timer's overhead.
: "${BENCH_VGPU_NODES:=1000,5000}"
: "${BENCH_VGPU_PODS:=10000}"
: "${BENCH_VGPU_COUNT:=1}"
: "${BENCH_VGPU_IMPLS:=noop,builtin-unthrottled,ours,ours-fragment}"
echo "== vGPU allocate action at scale (nodes $BENCH_VGPU_NODES, $BENCH_VGPU_PODS pods, count=$BENCH_VGPU_COUNT) =="
BENCH_NODES=$BENCH_VGPU_NODES BENCH_PODS=$BENCH_VGPU_PODS BENCH_IMPLS=$BENCH_VGPU_IMPLS \
	go test -run '^$' -bench 'BenchmarkAllocateVGPU$' -benchtime 1x -count "$BENCH_VGPU_COUNT" -timeout 0 ./deviceshare/ 2>/dev/null \
	| grep -E '^(Benchmark|goos|goarch|pkg|cpu)' | tee "$out/vgpu.txt"
echo "== vGPU: mean per implementation; ratios against the built-in (unthrottled) =="
awk '
function metric(name,   i) { for (i = 1; i <= NF; i++) if ($(i) == name) return $(i-1); return 0 }
/^BenchmarkAllocateVGPU\// {
	split($1, parts, "/"); nodes = parts[2]; sub(/^nodes=/, "", nodes); impl = parts[4]; sub(/^impl=/, "", impl); sub(/-[0-9]+$/, "", impl)
	k = nodes SUBSEP impl; n[k]++; seen[nodes] = 1; impls[impl] = 1
	pps[k] += metric("pods/s"); usp[k] += metric("us/pod"); cb[k] += metric("cb-us/pod")
	cpu[k] += metric("cpu-us/pod"); heap[k] += metric("peak-heap-MB"); al[k] += metric("allocs/op") / metric("allocated/op")
}
END {
	printf "%-6s %-20s %9s %9s %11s %11s %11s %9s\n", "nodes", "impl", "pods/s", "us/pod", "cb-us/pod", "cpu-us/pod", "allocs/pod", "heap-MB"
	for (nd in seen) for (im in impls) { k = nd SUBSEP im; if (!n[k]) continue
		printf "%-6s %-20s %9.1f %9.0f %11.0f %11.0f %11.0f %9.0f\n", nd, im, pps[k]/n[k], usp[k]/n[k], cb[k]/n[k], cpu[k]/n[k], al[k]/n[k], heap[k]/n[k] }
	for (nd in seen) {
		b = nd SUBSEP "builtin-unthrottled"; z = nd SUBSEP "noop"
		if (!n[b]) continue
		over = n[z] ? cb[z]/n[z] : 0
		for (im in impls) { if (im != "ours" && im != "ours-fragment") continue; o = nd SUBSEP im; if (!n[o]) continue
			printf "%s nodes, %s: pods/s %.2fx the built-in; callback time per pod %.1fx lower (%.1fx net of the timer overhead)\n", \
				nd, im, (pps[o]/n[o]) / (pps[b]/n[b]), (cb[b]/n[b]) / (cb[o]/n[o]), (cb[b]/n[b] - over) / (cb[o]/n[o] - over) }
	}
}' "$out/vgpu.txt" | sort -n | tee "$out/vgpu-summary.txt"

echo "== backend micro benchmarks =="
go test -run '^$' -bench . -benchmem -count "$BENCH_COUNT" ./backends/... | tee "$out/backends.txt" | grep -E '^Benchmark'
