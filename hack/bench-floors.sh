#!/usr/bin/env bash
# make bench-floors: every device type against its floor (issue 36, item 3).
# Runs BenchmarkAllocateBackends (deviceshare/bench_backends_test.go): per
# backend (vGPU, GPU share, HAMi Ascend 310P vNPU, MindCluster 310P) one
# allocate session of BENCH_FLOORS_PODS pods on BENCH_FLOORS_NODES nodes of 8
# cards, with that backend's floor (the cheapest device check for its
# resource) and with ours, round by round (every backend's floor then ours,
# BENCH_FLOORS_COUNT rounds), so each ratio compares runs minutes apart in
# one invocation. benchstat -col /impl puts ours beside its floor for every
# backend: pods/s, us/pod, cpu-us/pod and peak-heap-MB.
#
# Writes bench/results/bench-floors.txt (or BENCH_FLOORS_OUT): command,
# commit, date, machine, each round's load, the raw benchmark lines and
# benchstat's table.
#
# Knobs: BENCH_FLOORS_COUNT (3), BENCH_FLOORS_NODES (1000),
# BENCH_FLOORS_PODS (10000), BENCH_FLOORS_BACKENDS
# (vgpu,gpushare,ascend,mindcluster), BENCH_FLOORS_IMPLS (floor,ours; noop
# is the third), BENCH_RESULTS.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}"
: "${BENCHSTAT:=benchstat}"
: "${BENCH_FLOORS_COUNT:=3}"
: "${BENCH_FLOORS_NODES:=1000}"
: "${BENCH_FLOORS_PODS:=10000}"
: "${BENCH_FLOORS_BACKENDS:=vgpu,gpushare,ascend,mindcluster}"
: "${BENCH_FLOORS_IMPLS:=floor,ours}"
out=${BENCH_RESULTS:-bench/results}
mkdir -p "$out"
f="$out/${BENCH_FLOORS_OUT:-bench-floors.txt}"
source hack/provenance.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
$GO test -c -o "$tmp/ds.test" ./deviceshare/
{
	echo "# command: make bench-floors (hack/bench-floors.sh)"
	echo "# knobs: BENCH_FLOORS_COUNT=$BENCH_FLOORS_COUNT BENCH_FLOORS_NODES=$BENCH_FLOORS_NODES" \
		"BENCH_FLOORS_PODS=$BENCH_FLOORS_PODS BENCH_FLOORS_BACKENDS=$BENCH_FLOORS_BACKENDS BENCH_FLOORS_IMPLS=$BENCH_FLOORS_IMPLS"
	provenance
	echo "# binary: go test -c ./deviceshare/; then $BENCH_FLOORS_COUNT rounds of, per backend and implementation:" \
		"BENCH_NODES=$BENCH_FLOORS_NODES BENCH_PODS=$BENCH_FLOORS_PODS BENCH_BACKENDS=<backend> BENCH_IMPLS=<impl>" \
		"deviceshare.test -test.run '^\$' -test.bench 'BenchmarkAllocateBackends\$' -test.benchtime 1x -test.count 1 -test.timeout 0"
} >"$f"
raw=$(mktemp)
for round in $(seq "$BENCH_FLOORS_COUNT"); do
	echo "# round $round: $(date -u +%FT%TZ), load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$f"
	for backend in ${BENCH_FLOORS_BACKENDS//,/ }; do
		for impl in ${BENCH_FLOORS_IMPLS//,/ }; do
			(cd deviceshare && BENCH_NODES=$BENCH_FLOORS_NODES BENCH_PODS=$BENCH_FLOORS_PODS BENCH_BACKENDS=$backend BENCH_IMPLS=$impl \
				"$tmp/ds.test" -test.run '^$' -test.bench 'BenchmarkAllocateBackends$' -test.benchtime 1x -test.count 1 \
				-test.timeout 0 2>/dev/null) | awk -f hack/bench-lines.awk | tee -a "$raw" >>"$f"
		done
	done
done
{
	echo "## benchstat -col /impl"
	"$BENCHSTAT" -col /impl "$raw"
} | tee -a "$f"
rm -f "$raw"
