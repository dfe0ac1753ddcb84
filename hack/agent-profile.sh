#!/usr/bin/env bash
# agent-profile.sh: where the node agents' CPU goes during a burst. Runs the
# throughput harness's burst (e2e/cmd/throughput, SCHEDULERS, default
# floor,ours, at agent delay 0, AGENT_PROFILE_NODES nodes with ten pods per
# node) and samples every vgpu-device-plugin process with perf (cpu-clock,
# 999 Hz, call graphs from Go's frame pointers) from the moment all the
# agents of a run are up until the run ends; one perf recording per
# scheduler, so the floor's agents (pods that ask for no device) and ours
# are profiled in the same invocation. Writes the burst's own report and,
# per scheduler, perf's top functions by self time and by self+children
# (whole agents, all processes summed) to OUT (default
# bench/results/e2e-agent-profile.txt). Needs root (perf on other
# processes) and perf (linux-perf).
set -uo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}" "${OUT:=bench/results/e2e-agent-profile.txt}" "${AGENT_PROFILE_NODES:=50}" "${SCHEDULERS:=floor,ours}"
command -v perf >/dev/null || { echo "agent-profile: perf not found (apt-get install linux-perf)" >&2; exit 1; }
source hack/provenance.sh
work=$(mktemp -d /tmp/vshare-agent-profile-XXXXXX)
trap 'rm -rf "$work"' EXIT
nodes=$AGENT_PROFILE_NODES
# One throughput invocation per scheduler, so that each perf recording
# covers one scheduler's agents only.
{
	echo "# agent CPU profile during the burst (hack/agent-profile.sh; make bench-e2e-agent-profile)"
	provenance
	echo "# nodes: $nodes, pods: $((nodes * 10)), agent delay 0; perf record -e cpu-clock -F 999 -g on every vgpu-device-plugin process"
} >"$work/out"
for s in ${SCHEDULERS//,/ }; do
	"$GO" run -tags e2e ./e2e/cmd/throughput --schedulers="$s" --agent-delays=0 --nodes="$nodes" \
		--jobs=$((nodes / 2)) --pods-per-job=20 --idle=5s --out= >"$work/$s.burst" 2>&1 &
	run=$!
	# Wait for every agent of the run, then record them until the run ends.
	pids=""
	while kill -0 "$run" 2>/dev/null; do
		pids=$(pgrep -d, -x vgpu-device-plu || true)
		[ -n "$pids" ] && [ "$(tr , '\n' <<<"$pids" | wc -l)" -ge "$nodes" ] && break
		sleep 0.2
	done
	if [ -z "$pids" ]; then
		echo "agent-profile: $s: no agents seen" >&2
		cat "$work/$s.burst" >&2
		exit 1
	fi
	perf record -q -e cpu-clock -F 999 -g -o "$work/$s.perf" -p "$pids" 2>"$work/$s.perf.log" &
	rec=$!
	wait "$run"
	rc=$?
	kill -INT "$rec" 2>/dev/null
	wait "$rec"
	if [ "$rc" -ne 0 ]; then
		echo "agent-profile: $s: the burst failed (exit $rc)" >&2
		cat "$work/$s.burst" >&2
		exit "$rc"
	fi
	{
		echo
		echo "== $s: the burst =="
		grep -v '^[IWE][0-9]\{4\} ' "$work/$s.burst"
		echo
		echo "== $s: agents, top functions by self time (perf report --no-children) =="
		perf report -i "$work/$s.perf" --stdio --no-children --sort symbol -g none --percent-limit 1 2>/dev/null | grep -v '^$'
		echo
		echo "== $s: agents, top functions with their callees (perf report --children) =="
		perf report -i "$work/$s.perf" --stdio --children --sort symbol -g none --percent-limit 4 2>/dev/null | grep -v '^$'
	} >>"$work/out"
done
mkdir -p "$(dirname "$OUT")"
cp "$work/out" "$OUT"
echo "agent-profile: wrote $OUT"
