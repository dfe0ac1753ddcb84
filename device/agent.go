package device

import v1 "k8s.io/api/core/v1"

// OrderedAgent is implemented by backends whose node agent cannot tell which
// pod a kubelet Allocate call is for. The kubelet's device-plugin Allocate
// names devices, not pods, so HAMi-style agents serve the oldest pod whose
// allocation is still pending on their node. With two such pods pending on
// one node, the kubelet may admit them in another order than the agent
// picks them, and each container would get the other's cards and limits.
// The plugin's binder therefore binds such pods to a node one at a time: the
// next bind waits until the previous pod's allocation is no longer pending
// (or the pod is gone).
type OrderedAgent interface {
	// AgentPending reports whether the pod's allocation, as its annotations
	// record it, still waits for the node agent (for example bind-phase
	// "allocating").
	AgentPending(pod *v1.Pod) bool
}

// AgentClasser is implemented by the node devices of an OrderedAgent
// backend whose agent, on some nodes, tells pending pods apart by what
// the kubelet asks of it. The kubelet's Allocate (and
// GetPreferredAllocation) names no pod, only how many devices one
// container gets; an agent that serves only a pending pod whose next
// allocation entry has as many devices (this project's vGPU agent,
// vgpu-device-plugin/allocate, match.go) cannot hand one pod's entry to a
// pod that has no entry of that size. Classes name the requests a pod's
// allocation can answer: two pods whose classes are disjoint cannot be
// confused, and the binder lets them be pending on the node together,
// keeping one pending pod per node and class. An agent that serves the
// oldest pending pod whatever it is asked (upstream's) must give every
// pod every class the node can be asked for, so that all its pods wait
// for each other.
type AgentClasser interface {
	// AgentClasses returns the classes of the pod's allocation on this
	// node, as recorded in the pod's annotations; never empty.
	AgentClasses(pod *v1.Pod) []string
}

// Signed is implemented by backends whose node agent checks that an
// allocation was written by this scheduler (internal/allocsig). It names
// the annotations of a Reservation that stay as written after bind; the
// allocation signature covers them, with the pod's UID and the node.
// Annotations the agent rewrites (devices-to-allocate, bind-phase) must not
// be listed.
type Signed interface {
	SignedAnnotations() []string
}
