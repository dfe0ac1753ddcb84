package vgpuproto

import (
	"fmt"
	"strings"
)

// HAMi's allocation keys: what HAMi's scheduler writes on a pod it places
// and what HAMi's NVIDIA device plugin reads in Allocate. Checked against
// Project-HAMi/HAMi pkg/util/types.go (the bind keys and phases),
// pkg/device/nvidia/device.go (InitNvidiaDevice: the NVIDIA entries of
// InRequestDevices and SupportDevices; NodeLockNvidia), pkg/util/nodelock
// (NodeLockKey) and pkg/device-plugin/nvidiadevice/nvinternal/plugin
// (server.go Allocate, util.go).
const (
	// AnnotationHAMiToAllocate is HAMi's InRequestDevices entry for NVIDIA:
	// the cards the device plugin still has to hand out, consumed container
	// by container (the plugin empties the first entry with cards in each
	// Allocate). Same value as AnnotationHAMiAllocated when written.
	AnnotationHAMiToAllocate = "hami.io/vgpu-devices-to-allocate"
	// AnnotationHAMiAllocated is HAMi's SupportDevices entry for NVIDIA:
	// the durable record of the cards, which HAMi's scheduler reads back to
	// count a pod's usage.
	AnnotationHAMiAllocated = "hami.io/vgpu-devices-allocated"
	// AnnotationHAMiNode names the node the cards were chosen on; HAMi's
	// plugin serves only pods whose value is its own node.
	AnnotationHAMiNode = "hami.io/vgpu-node"
	// AnnotationHAMiTime is when the cards were chosen, in Unix seconds.
	AnnotationHAMiTime = "hami.io/vgpu-time"
	// AnnotationHAMiBindPhase is BindPhaseAllocating until HAMi's plugin
	// moves it to BindPhaseSuccess (every container served) or
	// BindPhaseFailed; the values are those of AnnotationBindPhase.
	AnnotationHAMiBindPhase = "hami.io/bind-phase"
	// AnnotationHAMiBindTime is when the bind started, in Unix seconds; HAMi's
	// plugin only considers pods that carry it.
	AnnotationHAMiBindTime = "hami.io/bind-time"
	// HAMiNodeLock is the node annotation HAMi's scheduler takes before it
	// binds a pod, "<RFC 3339 time>,<namespace>,<pod>" (protocol/nodelock
	// Format with a pod), and HAMi's plugin removes once it served (or
	// failed) that pod. Since HAMi PR #451 the plugin first looks for the
	// pod the lock names, and only then scans the node's pods.
	HAMiNodeLock = "hami.io/mutex.lock"
	// AnnotationHAMiHandshake is HAMi's NVIDIA handshake on the node:
	// older HAMi plugins write "Reported <time>", HAMi's scheduler
	// "Requesting_<time>" and "Deleted_<time>". Newer plugins write none.
	// This project reads HAMi nodes without it.
	AnnotationHAMiHandshake = "hami.io/node-handshake"
)

// hamiEntryEnd ends every container entry HAMi writes
// (EncodePodSingleDevice appends it after each container).
const hamiEntryEnd = ";"

// EncodeHAMiAllocation renders an allocation as HAMi writes
// hami.io/vgpu-devices-to-allocate and -allocated: initContainers empty
// entries first (HAMi v2.9's layout: init containers, then regular ones),
// then one entry per regular container, each card "UUID,type,mem,cores:"
// and every entry, the last included, followed by ";". HAMi plugins before
// v2.9 skip empty entries, so the leading ones change nothing for them.
// MIG instances are written as DecodeAllocation reads them, which HAMi does
// not: HAMi's MIG allocations are not matched.
func EncodeHAMiAllocation(initContainers int, containers [][]Device) string {
	var buf []byte
	for i := 0; i < initContainers; i++ {
		buf = append(buf, hamiEntryEnd...)
	}
	for _, c := range containers {
		for _, d := range c {
			buf = AppendDevice(buf, d)
		}
		buf = append(buf, hamiEntryEnd...)
	}
	return string(buf)
}

// DecodeHAMiAllocation reads hami.io/vgpu-devices-allocated or
// -to-allocate (key names it in errors): one slice per container entry, the
// trailing ";" HAMi writes after the last entry dropped, with the cards,
// limits and errors of DecodeAllocation. "" and a value of only ";"s after
// consumption decode to entries without cards.
func DecodeHAMiAllocation(key, value string) ([][]Device, error) {
	out, err := DecodeAllocation(strings.TrimSuffix(value, hamiEntryEnd))
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", key, err)
	}
	return out, nil
}

// HAMiAllocationHolds reports whether a decoded HAMi allocation still
// lists an NVIDIA card: HAMi's plugin sets bind-phase success only once
// hami.io/vgpu-devices-to-allocate names no NVIDIA card
// (PodAllocationTrySuccess).
func HAMiAllocationHolds(containers [][]Device) bool { return NextPending(containers) >= 0 }
