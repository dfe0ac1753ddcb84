// Package kube is the agent's thin wiring to a real API server: node-scoped
// informers (the node's pods, selected by spec.nodeName, and the Node
// itself) and the patchers behind allocate.Patcher and register.NodePatcher.
// Everything else in the agent works against those small interfaces; the
// e2e harness exercises this package against a real kube-apiserver.
package kube
