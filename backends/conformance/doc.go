// Package conformance is a backend-agnostic test suite that every
// deviceshare backend (GPU share, GPU number, HAMi vGPU, Ascend vNPU...)
// passes. A backend's test supplies a Suite (its Backend, a node factory, a
// random pod factory, a usage hook and malformed annotations) and calls Run:
//
//	func TestConformance(t *testing.T) {
//		conformance.Run(t, conformance.Suite{Backend: b, Node: node, Pod: pod, Usage: usage, Malformed: bad})
//	}
//
// Run checks, under every policy, through the device.Devices interface only:
//
//  1. No overcommit: a seeded stream of random pods is filtered and
//     allocated until the node is full; Allocate succeeds exactly when
//     FilterNode does, scores stay in [0, device.MaxScore], no usage reported
//     by the Usage hook ever exceeds its capacity, and re-accounting every
//     reservation on a fresh node gives the same state.
//  2. Release restores: Allocate then Release gives back the state before,
//     and allocating the same pod again makes the same choice.
//  3. AddResource of the annotated pod equals Allocate, never counts a pod
//     twice, and Release and SubResource undo either.
//  4. Pods without a device request are ignored.
//  5. Malformed annotations are rejected with an error naming the annotation
//     and leave the state unchanged.
//  6. DeepCopy is independent of the original.
//
// States are compared by their GetStatus text, their Usage and how a fixed
// set of probe pods filter and score on them, so GetStatus should render all
// state that matters. Backends must be deterministic: inject a fixed clock
// so that equal states give equal reservations.
package conformance
