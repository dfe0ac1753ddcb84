package mindcluster

// Name is the device type's name in logs, metrics and failure reasons.
const Name = "mindcluster310p"

// Failure reasons, stable across nodes so Volcano's fit-error histogram
// groups them.
const (
	// ReasonChipUnhealthy: the chip is in the unhealthy list.
	ReasonChipUnhealthy = "310P chip unhealthy"
	// ReasonChipHeldWhole: a whole-chip pod holds the chip. Resolvable.
	ReasonChipHeldWhole = "310P chip held whole by another pod"
	// ReasonChipSliced: a whole chip was asked of a chip holding vNPUs.
	// Resolvable.
	ReasonChipSliced = "310P chip already sliced into vNPUs"
	// ReasonChipAICore: too few free AI cores on the chip. Resolvable.
	ReasonChipAICore = "not enough free AI cores on 310P chip"
	// ReasonChipAICPU: too few free AI CPUs on the chip, even after a
	// downgrade. Resolvable.
	ReasonChipAICPU = "not enough free AI CPUs on 310P chip"
	// ReasonChipMemory: too little free memory on the chip. Resolvable.
	ReasonChipMemory = "not enough free memory on 310P chip"
	// ReasonChipDVPP: the chip's other vNPUs forbid the DVPP use. Resolvable.
	ReasonChipDVPP = "310P chip DVPP use conflicts with its vNPUs"
	// ReasonChipVGroups: the chip's vNPUs are spread over too many vNPU
	// groups for a vNPU of this size. Resolvable.
	ReasonChipVGroups = "310P chip's vNPU groups too fragmented for the vNPU"
	// ReasonNoFreeChips: the device plugin offers no chip and none is in use.
	ReasonNoFreeChips = "no 310P chip offered by the device plugin"
	// ReasonTooFewChips: the node has fewer chips than the pod asks for.
	ReasonTooFewChips = "fewer 310P chips on node than requested"
	// ReasonNotWholeChips: the AI cores asked are neither a vNPU template
	// (1, 2 or 4) nor whole chips of this node.
	ReasonNotWholeChips = "AI cores requested are neither a 310P vNPU nor whole chips of this node"
	// ReasonInFlight: a vNPU allocated on the node has not been created by
	// the device plugin yet; MindCluster creates one at a time per node.
	ReasonInFlight = "a 310P vNPU on the node is still being created by the device plugin"
)
