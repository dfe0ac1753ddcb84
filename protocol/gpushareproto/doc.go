// Package gpushareproto is the wire protocol of Volcano's GPU share and GPU
// number device modes: the resource names, the annotation keys, the
// gpu-index and unhealthy-list codecs and their limits. The scheduler
// backend (backends/gpushare) and the tests speak it through this package.
// It depends on nothing but the standard library and k8s.io/api.
//
// Upstream defines it in volcano-sh/volcano v1.10.0
// pkg/scheduler/api/devices/nvidia/gpushare (type.go: the keys;
// device_info.go: the annotations the scheduler writes), which Volcano's GPU
// share node agent (volcano-sh/devices) reads.
//
// # Node
//
// A node advertises its cards through its capacity: volcano.sh/gpu-number is
// the number of cards N (indices 0..N-1) and volcano.sh/gpu-memory the total
// GPU memory, split evenly: each card has floor(total/N). The node annotation
// volcano.sh/gpu-unhealthy-ids lists card indices that must never be chosen
// (DecodeUnhealthy). The node annotation "gpu" is the node lock the node
// agent expects while an allocation is in flight.
//
// # Pod
//
// A pod asks for volcano.sh/gpu-memory (share mode: part of one card) or
// volcano.sh/gpu-number (number mode: whole cards) in its container limits,
// or in its requests when it has no limit for the resource.
//
// The scheduler records the choice in two pod annotations:
// volcano.sh/gpu-index (share mode: the one card, "3"; number mode: the
// cards, "0,2"; EncodeIndex, DecodeIndex) and volcano.sh/predicate-time
// (Unix nanoseconds).
//
// # Limits and errors
//
// A card index has one spelling, digits without sign or leading zeros, so
// an accounted value reads back as written: the rule of every number of
// the protocols (protocol/internal/wireint). Errors name the annotation,
// the value and what is allowed. MaxCards and MaxQuantity bound what a node
// may advertise and a pod may ask for.
package gpushareproto
