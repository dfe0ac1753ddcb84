// Package kubectlvshare is the kubectl plugin `kubectl vshare`: who holds
// which card, what is free, where a pod of a given shape would fit, and why
// a pod waits.
//
// It reads only the API server (nodes, pods, PodGroups, events) and
// interprets what it reads with the code the scheduler runs: node
// registrations are decoded and pods accounted by the backends' own
// device.Devices (backends/vgpu, backends/ascend, backends/gpushare,
// backends/mindcluster), exactly as the deviceshare plugin's ledger does,
// and `fit` and `why` ask the same Devices whether a pod fits
// (FilterNode, ScoreNode, Allocate on a copy) and, card by card, why not
// (device.CardExplainer). It imports no Volcano scheduler package, so it
// stays a small client.
//
// Every command renders one report type (package report) as a table, a wide
// table, JSON or YAML. Run returns the process exit code: 0 success, 1 an
// error (no cluster, RBAC forbids, object not found), 2 a usage error, 3
// from `fit` when the shape fits no node. A malformed annotation is part of
// the report (an error cell naming the node or pod and the problem), never
// a failure of the command. docs/kubectl-vshare.md documents the commands,
// the JSON schema, the exit codes and the RBAC a reader needs.
package kubectlvshare
