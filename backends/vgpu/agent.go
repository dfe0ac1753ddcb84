package vgpu

import (
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

var _ device.OrderedAgent = (*Backend)(nil)

// AgentPending reports whether the node agent has yet to serve the pod's
// allocation: bind-phase is still allocating (hami.io/bind-phase for a pod
// allocated on a HAMi-registered node, whose agent moves only that one).
// The agent takes the oldest allocating pod on its node for each Allocate
// call, so only one may be pending per node (device.OrderedAgent).
func (b *Backend) AgentPending(pod *v1.Pod) bool {
	if phase, ok := pod.Annotations[vgpuproto.AnnotationHAMiBindPhase]; ok {
		return phase == vgpuproto.BindPhaseAllocating
	}
	return pod.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseAllocating
}

var _ device.Signed = (*Backend)(nil)

// SignedAnnotations are the allocation annotations the node agent never
// rewrites: the cards, the node and the times.
func (b *Backend) SignedAnnotations() []string {
	return []string{vgpuproto.AnnotationIDs, vgpuproto.AnnotationNode, vgpuproto.AnnotationTime, vgpuproto.AnnotationBindTime}
}

var _ device.AgentClasser = (*Devices)(nil)

// AgentClasses implements device.AgentClasser. This project's agent serves
// a kubelet Allocate for n cards only to a pending pod whose next entry
// has n cards, and the kubelet asks once per container for as many cards
// as the container's entry has (vgpu-device-plugin/allocate, match.go and
// containerFor), so a pod's classes are the sizes of its entries with
// cards: a pod asking for one card and a pod asking for two are never
// confused. Upstream's agents (volcano-vgpu-device-plugin, HAMi's) serve
// the oldest pending pod whatever the size (and fail the admission when it
// differs), so on their nodes a pod is in every class from one card to
// the node's count, and so is a pod whose record cannot be read.
func (d *Devices) AgentClasses(pod *v1.Pod) []string {
	entries, err := vgpuproto.DecodeAllocation(pod.Annotations[vgpuproto.AnnotationIDs])
	sizes := make(map[int]bool)
	for _, e := range entries {
		if vgpuproto.NextPending([][]vgpuproto.Device{e}) == 0 {
			sizes[len(e)] = true
		}
	}
	if !d.sizedAgent || err != nil || len(sizes) == 0 {
		n := max(len(d.info), 1)
		for s := range sizes {
			n = max(n, s)
		}
		for s := 1; s <= n; s++ {
			sizes[s] = true
		}
	}
	out := make([]string, 0, len(sizes))
	for s := range sizes {
		out = append(out, strconv.Itoa(s))
	}
	slices.Sort(out)
	return out
}
