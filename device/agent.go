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

// Signed is implemented by backends whose node agent checks that an
// allocation was written by this scheduler (internal/allocsig). It names
// the annotations of a Reservation that stay as written after bind; the
// allocation signature covers them, with the pod's UID and the node.
// Annotations the agent rewrites (devices-to-allocate, bind-phase) must not
// be listed.
type Signed interface {
	SignedAnnotations() []string
}
