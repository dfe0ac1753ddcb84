#!/usr/bin/env bash
# make e2e-real-node: the real-node tests (e2e/realnode: the kubelet with
# containerd, the chart installed from the images, the agent on its NVML
# path), verbose, with the provenance lines of the bench scripts, into
# bin/e2e-real-node.txt as well as the terminal. bench/results/e2e-real-node.txt
# is such a file, from the run docs/reliability.md, docs/install.md and
# e2e/README.md quote. Extra arguments go to go test (E2E_FLAGS).
set -uo pipefail
cd "$(dirname "$0")/.."
GO=${GO:-go}
out=bin/e2e-real-node.txt
mkdir -p bin
. hack/provenance.sh
cmd="$GO test -tags e2e ./e2e/realnode/ -v -timeout 30m -count=1 $*"
{
	echo "# command: $cmd"
	provenance
	start=$(date +%s)
	$cmd 2>&1
	rc=$?
	echo "# exit: $rc; wall time $(( $(date +%s) - start )) s"
	exit $rc
} | tee "$out"
exit "${PIPESTATUS[0]}"
