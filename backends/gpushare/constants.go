package gpushare

// Backend names, as returned by Name.
const (
	// NameShare is the backend name in share mode.
	NameShare = "gpushare"
	// NameNumber is the backend name in number mode.
	NameNumber = "gpunumber"
)

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
