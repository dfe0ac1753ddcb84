//go:build e2e

// Package e2e holds the end-to-end tests: a real local control plane (etcd,
// kube-apiserver, kwok, Volcano's controller-manager), this project's
// vc-scheduler and, per simulated GPU node, a vgpu-device-plugin process on
// mock NVML with a fake kubelet calling its Allocate. Run with
//
//	go test -tags e2e ./e2e/... -v -timeout 60m
//
// See README.md in this directory.
package e2e
