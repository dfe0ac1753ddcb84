//go:build tools

// Package nodetools pins, in a module graph of its own, the Kubernetes node
// and controller binaries the end-to-end harness runs for its real node:
// the kubelet, kube-proxy, kube-controller-manager and kube-scheduler of
// k8s.io/kubernetes v1.30.2, the version of the harness's kube-apiserver.
// They cannot live in the main module's graph: it pins runc v1.0.3 for
// Volcano, and the kubelet and the controller-manager need runc v1.1's
// libcontainer. The k8s.io staging modules are replaced by their v0.30.2
// releases, as in the main module.
package nodetools

import (
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
