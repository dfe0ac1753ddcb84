#!/usr/bin/env bash
# make bench: the in-process benchmarks, each against a baseline measured in
# the same run, with their raw output in bench/results/ (docs/benchmarks.md
# quotes only these files):
#
#   bench.txt              the run: command, commit, date, machine, section times
#   bench-gpushare.txt     GPU share: Volcano's allocate action, built-in vs ours
#   bench-vgpu.txt         vGPU, 10,000 pods at 1000 and 5000 nodes, anonymous
#                          pods and Volcano Jobs: noop, floor,
#                          builtin-unthrottled, ours, ours-fragment; benchstat,
#                          the summary table (pods/s against floor and noop)
#                          and the goal's ratios (ours / floor, issue 36)
#   vgpu-alloc.csv         one row per run (go test -count) of that benchmark
#   bench-vgpu-api.txt     vGPU, 500 pods: the throttled built-in against a real
#                          kube-apiserver (e2e/cmd/benchapi) and ours
#   vgpu-api.csv           one row per run of that benchmark
#   bench-ledger.txt       BenchmarkVGPULedgerMemory (bytes per GPU)
#   bench-agent.txt        the node agent's Allocate against upstream's shape
#   bench-backends.txt     per-backend micro benchmarks
#
# Knobs (environment): BENCH_COUNT (default 3: GPU share, backends),
# BENCH_VGPU_COUNT (5), BENCH_VGPU_NODES (1000,5000), BENCH_VGPU_PODS
# (10000), BENCH_VGPU_IMPLS (noop,floor,ours,ours-fragment,builtin-unthrottled),
# BENCH_VGPU_WORKLOADS (anonymous,jobs), BENCH_API_COUNT (1), BENCH_API_NODES
# (1000,5000), BENCH_API_PODS (500), BENCH_AGENT_N (200 Allocate calls),
# BENCH_SECTIONS (all of: gpushare vgpu api ledger agent backends),
# BENCH_RESULTS (bench/results).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
: "${BENCHSTAT:=benchstat}"
: "${BENCH_COUNT:=3}"
: "${BENCH_VGPU_COUNT:=5}"
: "${BENCH_VGPU_NODES:=1000,5000}"
: "${BENCH_VGPU_PODS:=10000}"
# The floors first and next to ours: the pairs a ratio compares run back to back.
: "${BENCH_VGPU_IMPLS:=noop,floor,ours,ours-fragment,builtin-unthrottled}"
: "${BENCH_VGPU_WORKLOADS:=anonymous,jobs}"
: "${BENCH_API_COUNT:=1}"
: "${BENCH_API_NODES:=1000,5000}"
: "${BENCH_API_PODS:=500}"
: "${BENCH_AGENT_N:=200}"
: "${BENCH_SECTIONS:=gpushare vgpu api ledger agent backends}"
out=${BENCH_RESULTS:-bench/results}
mkdir -p "$out"
export BENCH_COUNT BENCH_VGPU_COUNT BENCH_VGPU_NODES BENCH_VGPU_PODS BENCH_VGPU_IMPLS BENCH_VGPU_WORKLOADS \
	BENCH_API_COUNT BENCH_API_NODES BENCH_API_PODS BENCH_AGENT_N

# header describes the run at the top of every output file.
source hack/provenance.sh
header() {
	echo "# command: make bench (hack/bench.sh), section $1"
	echo "# knobs: BENCH_COUNT=$BENCH_COUNT BENCH_VGPU_COUNT=$BENCH_VGPU_COUNT BENCH_VGPU_NODES=$BENCH_VGPU_NODES" \
		"BENCH_VGPU_PODS=$BENCH_VGPU_PODS BENCH_VGPU_IMPLS=$BENCH_VGPU_IMPLS BENCH_VGPU_WORKLOADS=$BENCH_VGPU_WORKLOADS" \
		"BENCH_API_COUNT=$BENCH_API_COUNT" \
		"BENCH_API_NODES=$BENCH_API_NODES BENCH_API_PODS=$BENCH_API_PODS BENCH_AGENT_N=$BENCH_AGENT_N"
	provenance
}
# benchlines keeps go test's benchmark lines and the context benchstat reads
# (and mends the lines Volcano's logging splits).
benchlines() { awk -f hack/bench-lines.awk; }
want() { [[ " $BENCH_SECTIONS " == *" $1 "* ]]; }

summary="$out/bench.txt"
header "all ($BENCH_SECTIONS)" >"$summary"
started=$(date +%s)
timed() { # name, command...: runs a section and records how long it took
	local name=$1 t0
	shift
	t0=$(date +%s)
	echo "== $name =="
	"$@"
	echo "section $name: $(($(date +%s) - t0)) s" | tee -a "$summary"
}

gpushare() {
	local f="$out/bench-gpushare.txt" raw
	raw=$(mktemp)
	{
		header gpushare
		echo "# $GO test -run '^\$' -bench BenchmarkAllocateGPUShare -benchtime 1x -count $BENCH_COUNT -timeout 0 ./deviceshare/"
	} >"$f"
	$GO test -run '^$' -bench 'BenchmarkAllocateGPUShare' -benchtime 1x -count "$BENCH_COUNT" -timeout 0 ./deviceshare/ 2>/dev/null |
		benchlines | tee "$raw" >>"$f"
	{
		echo "## benchstat -col /impl"
		"$BENCHSTAT" -col /impl "$raw"
		echo "## pods/s, mean of runs; ratio ours / built-in"
		awk -f hack/bench-gpushare.awk "$raw"
	} | tee -a "$f"
	rm -f "$raw"
}

# vgpu runs the benchmark BENCH_VGPU_COUNT rounds of -count 1, each round
# every implementation at every size, rather than -count N (which runs one
# implementation N times in a row): the machine's speed drifts over the
# minutes a section takes, and interleaving puts each baseline run beside
# the runs it is compared with.
vgpu() {
	local f="$out/bench-vgpu.txt" raw bin round
	raw=$(mktemp)
	bin=$(mktemp)
	$GO test -c -o "$bin" ./deviceshare/
	{
		header vgpu
		echo "# $GO test -c -o deviceshare.test ./deviceshare/; then $BENCH_VGPU_COUNT rounds of:" \
			"BENCH_NODES=$BENCH_VGPU_NODES BENCH_PODS=$BENCH_VGPU_PODS BENCH_IMPLS=$BENCH_VGPU_IMPLS" \
			"BENCH_WORKLOAD=$BENCH_VGPU_WORKLOADS deviceshare.test -test.run '^\$' -test.bench 'BenchmarkAllocateVGPU\$' -test.benchtime 1x -test.count 1 -test.timeout 0"
	} >"$f"
	for round in $(seq "$BENCH_VGPU_COUNT"); do
		echo "# round $round: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$f"
		(cd deviceshare && BENCH_NODES=$BENCH_VGPU_NODES BENCH_PODS=$BENCH_VGPU_PODS BENCH_IMPLS=$BENCH_VGPU_IMPLS \
			BENCH_WORKLOAD=$BENCH_VGPU_WORKLOADS "$bin" -test.run '^$' -test.bench 'BenchmarkAllocateVGPU$' -test.benchtime 1x -test.count 1 -test.timeout 0 2>/dev/null) |
			benchlines | tee -a "$raw" >>"$f"
	done
	rm -f "$bin"
	awk -f hack/bench-vgpu.awk -v mode=csv "$raw" >"$out/vgpu-alloc.csv"
	{
		echo "## benchstat -col /impl"
		"$BENCHSTAT" -col /impl "$raw"
		echo "## summary (means of the runs in vgpu-alloc.csv; pods/s against floor's and noop's at the same workload and size)"
		awk -f hack/bench-vgpu.awk -v mode=table -v base=floor,noop "$raw"
		echo "## goal (issue 36): ours and ours-fragment at 0.95x or more of the floor's pods/s"
		awk -f hack/bench-vgpu.awk -v mode=goal "$raw"
	} | tee -a "$f"
	rm -f "$raw"
}

api() {
	local f="$out/bench-vgpu-api.txt" raw
	raw=$(mktemp)
	{
		header api
		echo "# $GO run -tags e2e ./e2e/cmd/benchapi --nodes $BENCH_API_NODES --pods $BENCH_API_PODS --count $BENCH_API_COUNT --impls builtin,ours"
	} >"$f"
	$GO run -tags e2e ./e2e/cmd/benchapi --nodes "$BENCH_API_NODES" --pods "$BENCH_API_PODS" --count "$BENCH_API_COUNT" \
		--impls builtin,ours 2> >(grep -E '^(e2e|benchapi):' >&2) | benchlines | tee "$raw" >>"$f"
	awk -f hack/bench-vgpu.awk -v mode=csv "$raw" >"$out/vgpu-api.csv"
	{
		echo "## summary (means of the runs in vgpu-api.csv; builtin is throttled, against the real kube-apiserver)"
		awk -f hack/bench-vgpu.awk -v mode=table -v base=builtin "$raw"
	} | tee -a "$f"
	rm -f "$raw"
}

ledger() {
	local f="$out/bench-ledger.txt"
	{
		header ledger
		echo "# $GO test -run '^\$' -bench 'BenchmarkVGPULedgerMemory\$' -benchtime 1x -count 3 -timeout 0 ./deviceshare/"
		$GO test -run '^$' -bench 'BenchmarkVGPULedgerMemory$' -benchtime 1x -count 3 -timeout 0 ./deviceshare/ 2>/dev/null | benchlines
	} >"$f"
	awk '/^BenchmarkVGPULedgerMemory/ { for (i = 1; i <= NF; i++) if ($i == "B/GPU") { s += $(i-1); n++ } }
		END { if (n) printf "## ledger: %.0f bytes per GPU, mean of %d (goal: under 1024)\n", s / n, n }' "$f" | tee -a "$f"
}

agent() {
	local f="$out/bench-agent.txt"
	{
		header agent
		echo "# $GO test -run '^\$' -bench Allocate -benchtime ${BENCH_AGENT_N}x -timeout 0 ./vgpu-device-plugin/allocate/"
		$GO test -run '^$' -bench Allocate -benchtime "${BENCH_AGENT_N}x" -timeout 0 ./vgpu-device-plugin/allocate/ 2>/dev/null | benchlines
	} >"$f"
	awk '/^BenchmarkAllocate/ { name = $1; sub(/-[0-9]+$/, "", name)
			for (i = 1; i <= NF; i++) { if ($i == "p50-ns") p50 = $(i-1); if ($i == "p99-ns") p99 = $(i-1) }
			printf "## %s: median %.0f us, p99 %.0f us\n", name, p50 / 1e3, p99 / 1e3 }' "$f" | tee -a "$f"
}

backends() {
	local f="$out/bench-backends.txt"
	{
		header backends
		echo "# $GO test -run '^\$' -bench . -benchmem -count $BENCH_COUNT -timeout 0 ./backends/..."
	} >"$f"
	$GO test -run '^$' -bench . -benchmem -count "$BENCH_COUNT" -timeout 0 ./backends/... 2>/dev/null | benchlines >>"$f"
	{
		echo "## means of the runs"
		awk -f hack/bench-backends.awk "$f"
	} | tee -a "$f"
}

for s in gpushare vgpu api ledger agent backends; do
	want "$s" && timed "$s" "$s"
done
echo "total: $(($(date +%s) - started)) s" | tee -a "$summary"
