// Package kube is a node agent's thin wiring to a real API server: the
// client, node-scoped informers (the node's pods, selected by spec.nodeName,
// and the Node itself), the patcher behind allocation.Patcher and
// registrar.NodePatcher, and the recorder of the events an agent records on
// pods it refuses. Everything else in the agents works against those small
// interfaces; the e2e harness exercises this package against a real
// kube-apiserver.
package kube
