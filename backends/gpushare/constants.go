package gpushare

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
	// share mode ("3"), a comma-separated list in number mode ("0,2").
	AnnotationGPUIndex = "volcano.sh/gpu-index"
	// AnnotationPredicateTime records when the cards were chosen, in Unix
	// nanoseconds; node agents use it to pick the oldest pending pod.
	AnnotationPredicateTime = "volcano.sh/predicate-time"
	// AnnotationUnhealthyIDs is the node annotation listing the indices of
	// cards that must never be chosen, comma-separated.
	AnnotationUnhealthyIDs = "volcano.sh/gpu-unhealthy-ids"
)

// Backend names, as returned by Name.
const (
	// NameShare is the backend name in share mode.
	NameShare = "gpushare"
	// NameNumber is the backend name in number mode.
	NameNumber = "gpunumber"
)

// LockNameShare is the node annotation upstream's GPU share node agent
// expects as the node lock while an allocation is in flight.
const LockNameShare = "gpu"

// Filter failure reasons. They are short and identical across nodes so that
// Volcano's fit-error histogram groups them.
const (
	// ReasonCardUnhealthy: the card is listed in volcano.sh/gpu-unhealthy-ids.
	// Unresolvable.
	ReasonCardUnhealthy = "GPU card unhealthy"
	// ReasonCardTooSmall: the card's total memory is below the request.
	// Unresolvable.
	ReasonCardTooSmall = "GPU card too small for requested memory"
	// ReasonInsufficientMemory: the card's free memory is below the request.
	// Resolvable by evicting share pods.
	ReasonInsufficientMemory = "insufficient GPU memory on card"
	// ReasonCardHeldWhole: a gpu-number pod holds the whole card. Resolvable.
	ReasonCardHeldWhole = "GPU card held whole by a gpu-number pod"
	// ReasonTooFewHealthyCards: the node has fewer healthy cards than the
	// pod asks for. Unresolvable.
	ReasonTooFewHealthyCards = "not enough healthy GPU cards on node"
	// ReasonNotEnoughIdleCards: enough healthy cards, but too few of them are
	// idle. Resolvable.
	ReasonNotEnoughIdleCards = "not enough idle GPU cards"
)

// Limits on decoded values. They are far above any real node or pod and keep
// sums from overflowing int64.
const (
	// MaxCards is the largest card count a node may advertise.
	MaxCards = 1024
	// MaxQuantity is the largest gpu-memory or gpu-number value accepted in
	// a container or a node's capacity (2^40).
	MaxQuantity = int64(1) << 40
)
