//go:build tools

// Package tools records, for go.mod, the commands the end-to-end harness
// builds from this module's graph: kube-apiserver and Volcano's
// controller-manager. kwok is built in its own module graph (see
// e2e/framework/build.go) and is deliberately absent here.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "volcano.sh/volcano/cmd/controller-manager"
)
