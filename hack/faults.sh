#!/bin/sh
# The long fault campaign, as `make faults` runs it (docs/reliability.md):
# TestFaultCampaign for FAULT_SEEDS seeds of FAULT_DURATION each, then
# TestNodeSideChurn for FAULT_DURATION. The full `go test -v` output goes to
# $FAULTS_LOG (bin/faults.log); the summary, headed by how, where and from
# which commit it was made, to $FAULTS_OUT (bench/results/faults.txt):
# each seed's line (faults injected by kind, scheduler-crash windows in the
# notes, auditor samples, violations), the totals, every violation and the
# tests' results. Extra arguments go to `go test` (E2E_FLAGS).
set -u

GO=${GO:-go}
SEEDS=${FAULT_SEEDS:-1-10}
DURATION=${FAULT_DURATION:-4m}
OUT=${FAULTS_OUT:-bench/results/faults.txt}
LOG=${FAULTS_LOG:-bin/faults.log}
mkdir -p "$(dirname "$OUT")" "$(dirname "$LOG")"

commit=$(git rev-parse HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- 2>/dev/null; then
	commit="$commit, with uncommitted changes"
fi
started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
t0=$(date +%s)
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1)
mem=$(awk '/^MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo 2>/dev/null)
machine="$(uname -srm), $(nproc 2>/dev/null || echo ?) cores${cpu:+ ($cpu)}${mem:+, $mem}"

cmd="FAULT_SEEDS=$SEEDS FAULT_DURATION=$DURATION NODESIDE_CHURN=$DURATION $GO test -tags e2e ./e2e/ -run '^(TestFaultCampaign|TestNodeSideChurn)\$' -v -timeout 0 -count=1 $*"
echo "$cmd" >&2
FAULT_SEEDS=$SEEDS FAULT_DURATION=$DURATION NODESIDE_CHURN=$DURATION \
	"$GO" test -tags e2e ./e2e/ -run '^(TestFaultCampaign|TestNodeSideChurn)$' -v -timeout 0 -count=1 "$@" >"$LOG" 2>&1
rc=$?
wall=$(( $(date +%s) - t0 ))

{
	echo "# make faults: the randomized fault campaign (docs/reliability.md)"
	echo "# written by hack/faults.sh; regenerate, do not edit"
	echo "command: $cmd"
	echo "commit:  $commit"
	echo "date:    $started, $wall s wall clock"
	echo "machine: $machine"
	echo "exit:    $rc (full output in $LOG)"
	echo
	# Per seed, totals, violations, crash windows and the tests' results,
	# without go test's file:line prefixes.
	grep -E 'seed [0-9]+ \(node lock|fault campaign:|faults: scheduler-crash|seed [0-9]+: |node-side churn:|^(--- (PASS|FAIL)|PASS$|FAIL|ok )' "$LOG" |
		sed -E 's/^[[:space:]]+[a-z_]+\.go:[0-9]+: //'
} >"$OUT"
cat "$OUT"
exit $rc
