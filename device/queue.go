package device

import (
	v1 "k8s.io/api/core/v1"
)

// QueueRequester is implemented by backends that can tell, before any card
// is chosen, what a pod will hold in the resource names AddQueueResource
// reports (for example a vGPU request of 2 cards of 3000 MiB holds 6000 MiB,
// where the pod spec says 3000). The plugin checks queue capability with
// it. Amounts that depend on the card chosen (a percentage of its memory)
// are left out; they are counted once allocated.
type QueueRequester interface {
	// QueueRequest returns the pod's amounts by resource name; nil when the
	// pod asks for nothing of this type or its request is invalid.
	QueueRequest(pod *v1.Pod) map[string]float64
}
