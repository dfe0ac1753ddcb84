#!/usr/bin/env bash
# bench-rules.sh: the binding rule of issue 36 against the rule before it,
# on the same machine in one invocation, several rounds.
#
# Before issue 36, the binder kept one pod pending with the agent per node,
# whatever the pods asked for. Since, with this project's agent (which
# serves a kubelet Allocate for n cards only to a pending pod whose next
# entry has n cards), a one-card and a two-card pod may be pending on a
# node together (device.AgentClasser; docs/architecture.md, "Which binds
# may overlap on a node"). The old rule is what the binder does on an
# upstream agent's node: every pod in every class. This script builds our
# vc-scheduler a second time with backends/vgpu's AgentClasses treating
# every node as an upstream agent's (go build -overlay over a patched copy
# of backends/vgpu/agent.go; the tree is not touched), and runs the burst
# (e2e/cmd/throughput) with floor, ours and ours-alt (that build) at each
# of RULES_DELAYS, RULES_ROUNDS times, 50 nodes and ten pods per node as
# the slow-agent curve. Writes $RULES_OUT/$RULES_NAME.txt and .csv
# (default bench/results/e2e-burst-rules).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${GO:=go}" "${RULES_ROUNDS:=3}" "${RULES_DELAYS:=0,500ms}" "${RULES_NODES:=50}" "${RULES_NAME:=e2e-burst-rules}" "${RULES_OUT:=bench/results}"
work=$(mktemp -d /tmp/vshare-bench-rules-XXXXXX)
trap 'rm -rf "$work"' EXIT
src=backends/vgpu/agent.go
# The one line that keeps a sized agent's pods to their own classes.
line='	if !d.sizedAgent || err != nil || len(sizes) == 0 {'
if [ "$(grep -cxF -- "$line" "$src")" != 1 ]; then
	echo "bench-rules: $src no longer has the line this script patches:" >&2
	echo "  $line" >&2
	echo "update hack/bench-rules.sh to build the old rule from the code as it is now" >&2
	exit 1
fi
patched="$work/agent.go"
awk -v line="$line" '$0 == line { print "	if true || !d.sizedAgent || err != nil || len(sizes) == 0 { // the old rule: every pod in every class"; next } { print }' "$src" >"$patched"
printf '{"Replace":{"%s":"%s"}}\n' "$PWD/$src" "$patched" >"$work/overlay.json"
tags=$(sed -n 's/^const TestTags = "\(.*\)"$/\1/p' e2e/framework/build.go)
# The harness builds ours with these tags; the old rule's build must match.
if [ -z "$tags" ]; then
	echo "bench-rules: no TestTags constant found in e2e/framework/build.go; update this script" >&2
	exit 1
fi
"$GO" build -tags "$tags" -overlay "$work/overlay.json" -o "$work/vc-scheduler-oldrule" ./cmd/vc-scheduler
"$GO" run -tags e2e ./e2e/cmd/throughput --schedulers=floor,ours,ours-alt --rounds="$RULES_ROUNDS" \
	--agent-delays="$RULES_DELAYS" --nodes="$RULES_NODES" --jobs=$((RULES_NODES / 2)) --pods-per-job=20 --idle=5s \
	--alt-scheduler="$work/vc-scheduler-oldrule" \
	--alt-note="ours with the binding rule before issue 36: one pod pending with the agent per node whatever its card count (hack/bench-rules.sh)" \
	--name="$RULES_NAME" --out="$RULES_OUT"
