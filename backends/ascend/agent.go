package ascend

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

var _ device.OrderedAgent = (*Backend)(nil)

// AgentPending reports whether HAMi's Ascend device plugin has yet to serve
// the pod's allocation of this chip type: the pod carries this backend's
// allocation and hami.io/bind-phase is still allocating. The plugin takes
// the oldest allocating pod on its node for each Allocate call, so only one
// may be pending per node (device.OrderedAgent).
func (b *Backend) AgentPending(pod *v1.Pod) bool {
	if _, ok := pod.Annotations[b.keys.ToAllocate]; !ok {
		return false
	}
	return pod.Annotations[ascendproto.AnnotationBindPhase] == ascendproto.BindPhaseAllocating
}

var _ device.Signed = (*Backend)(nil)

// SignedAnnotations are the allocation annotations the node agent never
// rewrites: the allocated vNPUs, the runtime info, the node and the times.
func (b *Backend) SignedAnnotations() []string {
	return []string{b.keys.Allocated, b.keys.RuntimeInfo, ascendproto.AnnotationAssignedNode, ascendproto.AnnotationAssignedTime, ascendproto.AnnotationBindTime}
}
