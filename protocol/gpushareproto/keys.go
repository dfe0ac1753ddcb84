package gpushareproto

import v1 "k8s.io/api/core/v1"

// Resource names, identical to Volcano v1.10.0's.
const (
	// ResourceGPUMemory is the GPU memory a share-mode pod asks for and the
	// node's total GPU memory in its capacity (an integer, MiB by convention).
	ResourceGPUMemory v1.ResourceName = "volcano.sh/gpu-memory"
	// ResourceGPUNumber is the number of whole cards a number-mode pod asks
	// for and the node's card count in its capacity.
	ResourceGPUNumber v1.ResourceName = "volcano.sh/gpu-number"
)

// Annotation keys, identical to Volcano v1.10.0's.
const (
	// AnnotationGPUIndex records the chosen cards on the pod: one index in
	// share mode ("3"), a comma-separated list in number mode ("0,2"). See
	// DecodeIndex.
	AnnotationGPUIndex = "volcano.sh/gpu-index"
	// AnnotationPredicateTime records when the cards were chosen, in Unix
	// nanoseconds; node agents use it to pick the oldest pending pod.
	AnnotationPredicateTime = "volcano.sh/predicate-time"
	// AnnotationUnhealthyIDs is the node annotation listing the indices of
	// cards that must never be chosen, comma-separated. See DecodeUnhealthy.
	AnnotationUnhealthyIDs = "volcano.sh/gpu-unhealthy-ids"
)

// LockNameShare is the node annotation upstream's GPU share node agent
// expects as the node lock while an allocation is in flight.
const LockNameShare = "gpu"

// Limits on decoded values. They are far above any real node or pod and keep
// sums from overflowing int64.
const (
	// MaxCards is the largest card count a node may advertise.
	MaxCards = 1024
	// MaxQuantity is the largest gpu-memory or gpu-number value accepted in
	// a container or a node's capacity (2^40).
	MaxQuantity = int64(1) << 40
)
