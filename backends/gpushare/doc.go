// Package gpushare implements Volcano's GPU share and GPU number device modes
// as deviceshare backends (device.Backend and device.Devices), wire-compatible with
// the built-in implementation of Volcano v1.10.0.
//
// # Wire contract
//
// The resource names, the annotations and their formats are
// protocol/gpushareproto's. A node advertises its cards through its capacity
// (volcano.sh/gpu-number cards sharing volcano.sh/gpu-memory evenly) and
// lists unhealthy ones in volcano.sh/gpu-unhealthy-ids. A pod asks for
// volcano.sh/gpu-memory (share mode: part of one card) or
// volcano.sh/gpu-number (number mode: whole cards); its request follows the
// Kubernetes rule: the sum over regular containers and restartable
// (sidecar) init containers, or the largest ordinary init container plus
// the sidecars started before it, whichever is larger. Allocate records the
// choice in volcano.sh/gpu-index and volcano.sh/predicate-time (from the
// injected clock).
//
// # Differences from upstream
//
//   - Card choice is deterministic and policy-aware: binpack takes the fullest
//     card that fits, spread the emptiest, ties to the lowest index; number
//     mode takes the lowest idle healthy indices (upstream walks a map).
//   - ScoreNode returns a real score (upstream returns 0).
//   - Malformed annotations are errors naming the annotation and the value,
//     not silently ignored; a malformed unhealthy list makes NewDevices fail,
//     so the plugin marks the node unavailable for the device type with that
//     reason instead of guessing which cards are healthy.
//   - A card held whole by a gpu-number pod is full for share pods, and a
//     card holding share pods is not idle for gpu-number pods, whichever
//     backend accounts them (upstream counts a gpu-number pod as using no
//     memory).
//
// # Accounting semantics
//
//   - AddResource ignores pods in phase Succeeded or Failed, pods without
//     volcano.sh/gpu-index and pods without a gpu-memory or gpu-number request.
//   - AddResource of a pod already accounted (by pod UID) is a no-op when it
//     records the same allocation and an error when it records a different
//     one; a pod is never counted twice.
//   - SubResource of a pod that is not accounted is a no-op with a nil error
//     (the plugin may see deletions of pods it never accounted). It removes
//     what was recorded when the pod was added, not what the pod's
//     annotations say now, so Add and Sub stay exact inverses.
//   - Release checks that the reservation's gpu-index matches what the pod
//     holds and refuses (state unchanged) when it does not.
package gpushare
