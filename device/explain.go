package device

import v1 "k8s.io/api/core/v1"

// CardExplainer is implemented by Devices that can tell, card by card, why
// a pod does not fit the node. The scheduler's FilterNode reports only the
// distinct reasons, which Volcano's fit-error histogram counts per node;
// kubectl-vshare shows which card refused for which reason. It only reads.
type CardExplainer interface {
	// ExplainCards returns one verdict per card, in card index order, for
	// the first of the pod's containers that does not fit the cards as the
	// containers before it leave them. It returns nil when the pod fits, asks
	// for nothing of this type, or its request is invalid (FilterNode says
	// why).
	ExplainCards(pod *v1.Pod, policy string) []CardVerdict
}

// CardVerdict is whether one card takes one container, and why not.
type CardVerdict struct {
	// Index is the card's position in the node's registration, as in
	// CardUsage.Index.
	Index int
	// Container is the index in pod.Spec.Containers of the container the
	// verdict is about, or in pod.Spec.InitContainers when InitContainer.
	Container     int
	InitContainer bool
	// Reason is one of the per-card reasons FilterNode reports; "" when the
	// card would take the container (the node may still be short of cards).
	Reason string
	// Resolvable says whether evicting pods could make the card fit.
	Resolvable bool
}

// CardDescriber is implemented by Devices whose cards are partitioned in a
// way CardUsage does not show (MIG geometries, vNPU templates). It only
// reads.
type CardDescriber interface {
	// CardLayouts returns, by card index, how each card is partitioned now,
	// for people to read (for example "mig 1g.10gb x2 of group all-1g"), or
	// "" for a card that is not partitioned.
	CardLayouts() []string
}
