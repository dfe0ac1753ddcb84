package vgpu

import (
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
