package allocation

import (
	"context"

	v1 "k8s.io/api/core/v1"
)

// Patcher writes the protocol's annotations (nodeagent/kube.Patcher
// implements it).
type Patcher interface {
	// PatchPodAnnotations merges annotations into the pod's, failing if the
	// pod was replaced (another UID).
	PatchPodAnnotations(ctx context.Context, pod *v1.Pod, annotations map[string]string) error
	// ReleaseNodeLock removes the node lock taken for the pod's allocation.
	ReleaseNodeLock(ctx context.Context, pod *v1.Pod) error
}

// Protocol names the pod annotations of an allocation protocol, and the
// values of its bind-phase.
type Protocol struct {
	// ToAllocate holds the devices still to serve, one entry per
	// container; an agent empties a container's entry when it serves it.
	ToAllocate string
	// BindPhase is the allocation's phase: Allocating until every
	// container is served, then Success, or Failed when refused.
	BindPhase                   string
	Allocating, Success, Failed string
	// Node names the node the scheduler wrote the allocation for.
	Node string
	// Serves, when set, says whether the pod still has devices for this
	// agent to serve: where agents of several device types share BindPhase
	// (HAMi's Ascend agents, one per chip type), a pod in allocating phase
	// waits only for those whose devices it still names.
	Serves func(pod *v1.Pod) bool
}

// Pending reports whether the pod waits for its node's agent: in
// allocating phase, not being deleted, not terminal, and (Serves) with
// devices left for this agent.
func (p Protocol) Pending(pod *v1.Pod) bool {
	return pod.Annotations[p.BindPhase] == p.Allocating && pod.DeletionTimestamp == nil && !Terminal(pod) &&
		(p.Serves == nil || p.Serves(pod))
}

// served reports whether a pod that is no longer pending left because its
// agent served it: its phase is success or, with Serves, it is still
// allocating but has nothing left for this agent.
func (p Protocol) served(pod *v1.Pod) bool {
	switch pod.Annotations[p.BindPhase] {
	case p.Success:
		return true
	case p.Allocating:
		return p.Serves != nil && pod.DeletionTimestamp == nil && !Terminal(pod) && !p.Serves(pod)
	}
	return false
}

// Terminal reports whether the pod's containers are done with their
// devices.
func Terminal(pod *v1.Pod) bool {
	return pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed
}

// Pods returns the pods among an indexer's objects.
func Pods(objs []any) []*v1.Pod {
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok {
			pods = append(pods, p)
		}
	}
	return pods
}
