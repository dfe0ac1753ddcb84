//go:build e2e

// Package framework runs a throw-away local control plane for the end-to-end
// tests and the demo: etcd, kube-apiserver, Volcano's controller-manager,
// kwok, this project's vc-scheduler, and per simulated GPU node one
// vgpu-device-plugin process (mock NVML) registered with a fake kubelet that
// lives in the calling process. The fake kubelet admits containers as the
// kubelet's device manager does, init containers and native sidecars
// included (kubelet.go); InitContainerCases and CheckContainerAnswers
// (initcontainers.go) compare its answers, or a real kubelet's, with the
// scheduler's allocation.
//
// Everything listens on 127.0.0.1 on ports picked at random. Children run in
// their own process group with a parent-death signal, log to files in the
// work directory, and are stopped in reverse order by Cluster.Stop. Binaries
// are built once per machine into a cache directory keyed on go.sum (see
// EnsureBinaries).
//
// The package is behind the e2e build tag so that plain `go test ./...` and
// `go vet ./...` never compile the control plane's dependencies.
package framework
