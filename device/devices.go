package device

import (
	v1 "k8s.io/api/core/v1"
)

// Devices is the state of one device type on one node. Implementations are
// not safe for concurrent use; the plugin serialises access (sessions run one
// at a time and the ledger holds its own lock).
type Devices interface {
	// AddResource accounts the allocation recorded in the pod's annotations.
	// A pod without a recorded allocation of this type is ignored (nil error).
	// A malformed or inconsistent annotation returns an error naming the
	// annotation and the value, and leaves the state unchanged.
	AddResource(pod *v1.Pod) error
	// SubResource removes what AddResource added for the same pod.
	SubResource(pod *v1.Pod) error
	// AddQueueResource reports what the pod holds on this node, by resource
	// name, for queue accounting. Empty when the pod holds nothing here.
	AddQueueResource(pod *v1.Pod) map[string]float64

	// HasDeviceRequest reports whether the pod asks for this device type.
	HasDeviceRequest(pod *v1.Pod) bool
	// FilterNode reports whether the pod fits the node's cards under the
	// policy, with per-card reasons when it does not.
	FilterNode(pod *v1.Pod, policy string) *Status
	// ScoreNode scores a node the pod fits, in [0, MaxScore]. Higher is
	// better under the given policy (binpack prefers fuller nodes, spread
	// emptier ones).
	ScoreNode(pod *v1.Pod, policy string) float64

	// Allocate picks the cards for the pod, accounts them and returns the
	// annotations that record the choice. It never calls the API server.
	Allocate(pod *v1.Pod, policy string) (*Reservation, error)
	// Release gives back exactly what Allocate took for the reservation.
	Release(pod *v1.Pod, r *Reservation) error

	// GetIgnoredDevices lists the resource names this device type accounts
	// itself and nodes do not advertise, which Volcano's own resource fit must
	// not see.
	GetIgnoredDevices() []string
	// GetStatus summarises the node's cards for logs and debugging.
	GetStatus() string
	// DeepCopy returns an independent copy.
	DeepCopy() Devices
}

// Reservation is what Allocate decided for one pod on one node.
type Reservation struct {
	// Annotations record the allocation on the pod. They travel on the
	// v1.Binding and are read back by AddResource. The map is the
	// caller's once returned (the plugin adds its own keys to it), so
	// Allocate returns a fresh one and Release reads only its own keys.
	Annotations map[string]string
	// NodeLocks are node lock annotations the node's agent expects for this
	// allocation whatever deviceshare.NodeLockEnable says (HAMi's NVIDIA
	// plugin finds the pod it serves by hami.io/mutex.lock and removes it).
	// The binder takes them, with the pod named in the value, right before
	// the bind, instead of the backend's NodeLocker lock, which that agent
	// would never release.
	NodeLocks []string
}

// MaxScore is the highest score ScoreNode returns.
const MaxScore = 100

// Scheduling policies understood by every backend.
const (
	// PolicyBinpack fills the fullest card (and node) that fits.
	PolicyBinpack = "binpack"
	// PolicySpread prefers the emptiest card (and node).
	PolicySpread = "spread"
	// PolicyFragment minimises GPU fragmentation against the workload the
	// backend has seen (fragmentation gradient descent). Backends without
	// a fragmentation model treat it as binpack.
	PolicyFragment = "fragment"
)

// ApplyReservation returns pod carrying the reservation's annotations,
// leaving pod untouched (it may be an informer's object). The result is a
// shallow copy: it has its own annotations map and shares everything else
// (spec, status, labels) with pod, so it must be read, never written. The
// plugin builds one per allocation and keeps some until the informer shows
// the bind; a deep copy cost 3 KB a pod (mostly the containers' resource
// lists), a quarter of the heap the plugin added at 10,000 pods (issue 36).
func ApplyReservation(pod *v1.Pod, r *Reservation) *v1.Pod {
	out := *pod
	if r == nil || len(r.Annotations) == 0 {
		return &out
	}
	out.Annotations = make(map[string]string, len(pod.Annotations)+len(r.Annotations))
	for k, v := range pod.Annotations {
		out.Annotations[k] = v
	}
	for k, v := range r.Annotations {
		out.Annotations[k] = v
	}
	return &out
}

// Advertiser is implemented by Devices whose resources the node does not
// advertise itself (memory and core shares that no kubelet device plugin
// registers, such as HAMi's Ascend memory or renamed vGPU resources).
// Volcano v1.10's own resource fit rejects a pod whose request names a
// resource the node lacks, and its cache refuses the bind, so the plugin
// advertises these totals in the node's status (capacity and allocatable)
// as extended resources. The totals are what the cards hold, in the units
// pods request, so Volcano's (and the kubelet's) node-level sum is a
// necessary condition of the per-card fit and never rejects a pod the
// cards could take.
type Advertiser interface {
	// Advertised returns the node-level totals to advertise.
	Advertised() v1.ResourceList
}
