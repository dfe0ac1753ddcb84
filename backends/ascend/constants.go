package ascend

// Annotation key parts; the full keys embed the entry's commonWord (see Keys).
const (
	// hamiPrefix is HAMi's annotation domain.
	hamiPrefix = "hami.io/"
	// huaweiPrefix is the domain of the runtime-info annotation.
	huaweiPrefix = "huawei.com/"
)

// Node annotations that do not depend on the chip type.
const (
	// AnnotationNodeHAMiCore is written by HAMi's ascend-device-plugin:
	// "true" when the node runs in hami-vnpu-core (soft slicing) mode,
	// "false" when it slices by templates. It overrides vnpus.hamiVnpuCore.
	AnnotationNodeHAMiCore = "hami-vnpu-core"
	// NodeLockName is the node lock HAMi's scheduler takes for Ascend and
	// its device plugin releases (HAMi NodeLockAscend).
	NodeLockName = "hami.io/mutex.lock"
)

// Pod annotations written by Allocate that do not depend on the chip type
// (HAMi util: AssignedNodeAnnotations, AssignedTimeAnnotations,
// DeviceBindPhase, BindTimeAnnotations; and "predicate-time").
const (
	AnnotationAssignedNode = "hami.io/vgpu-node"
	AnnotationAssignedTime = "hami.io/vgpu-time"
	AnnotationBindPhase    = "hami.io/bind-phase"
	AnnotationBindTime     = "hami.io/bind-time"
	AnnotationPredicate    = "predicate-time"
	// BindPhaseAllocating is the bind phase Allocate writes; the device
	// plugin moves it to success or failed.
	BindPhaseAllocating = "allocating"
)

// Pod annotations users set.
const (
	// AnnotationVNPUMode set to hami-core asks for soft slicing by memory
	// and AI-core percentage instead of templates.
	AnnotationVNPUMode = "huawei.com/vnpu-mode"
	// ModeHAMiCore is the value of AnnotationVNPUMode for soft slicing.
	ModeHAMiCore = "hami-core"
)

// Filter failure reasons, stable across nodes so that Volcano's fit-error
// histogram groups them. The chip type is not part of them.
const (
	ReasonUnhealthy      = "NPU card unhealthy"
	ReasonTypeMismatch   = "NPU card of another chip type"
	ReasonUUIDExcluded   = "NPU card excluded by use-<chip>-uuid or no-use-<chip>-uuid"
	ReasonModeMismatch   = "NPU node slices by templates; huawei.com/vnpu-mode hami-core or a core request needs a hami-vnpu-core node"
	ReasonCardTooSmall   = "NPU card memory smaller than the request or its template"
	ReasonCountFull      = "NPU card shared by its maximum number of vNPUs"
	ReasonExclusiveBusy  = "NPU card in use; a core request of 100 needs an unused card"
	ReasonWholeBusy      = "NPU card in use; a whole-card request needs an unused card"
	ReasonCoresFull      = "NPU card cores fully allocated; a request without cores cannot share it"
	ReasonInsufficientCo = "insufficient NPU cores on card"
	ReasonInsufficientMe = "insufficient NPU memory on card"
	ReasonSlicing        = "NPU card cannot hold the template next to its other vNPUs (AI cores, AI CPUs or DVPP)"
	ReasonTooFewCards    = "node has fewer NPU cards than requested"
	ReasonTooFewFitting  = "fewer fitting NPU cards than requested"
)

// Limits on decoded values.
const (
	// MaxCards is the most cards a node may register.
	MaxCards = 256
	// MaxCount is the most vNPUs one card may be shared by.
	MaxCount = 1000
	// MaxMemoryMiB is the largest card memory accepted (1 PiB).
	MaxMemoryMiB = int64(1) << 30
	// fullCores is a whole card in soft mode, in percent.
	fullCores = 100
	// networkWeight is the share of the node score given to keeping a
	// multi-card Ascend910 request inside one network group (HAMi's
	// Ascend910NetworkWeight).
	networkWeight = 10
	// ascend910Prefix marks chip types whose cards carry NetworkID.
	ascend910Prefix = "Ascend910"
)

// Keys are the annotation keys of one chip type.
type Keys struct {
	// Register is the node registration: hami.io/node-register-<commonWord>.
	Register string
	// Handshake is hami.io/node-handshake-<commonWord>; "Deleted_..." means
	// the node agent is gone.
	Handshake string
	// UseUUID and NoUseUUID are the pod's card selectors:
	// hami.io/use-<commonWord>-uuid and hami.io/no-use-<commonWord>-uuid.
	UseUUID, NoUseUUID string
	// ToAllocate is hami.io/<commonWord>-devices-to-allocate, which the
	// device plugin consumes container by container.
	ToAllocate string
	// Allocated is hami.io/<commonWord>-devices-allocated, the durable
	// record accounting reads.
	Allocated string
	// RuntimeInfo is huawei.com/<commonWord>: the JSON list the device
	// plugin and runtime read ({UUID, temp} or {UUID, memory, core}).
	RuntimeInfo string
}

// KeysFor returns the annotation keys of the chip type commonWord.
func KeysFor(commonWord string) Keys {
	return Keys{
		Register:    hamiPrefix + "node-register-" + commonWord,
		Handshake:   hamiPrefix + "node-handshake-" + commonWord,
		UseUUID:     hamiPrefix + "use-" + commonWord + "-uuid",
		NoUseUUID:   hamiPrefix + "no-use-" + commonWord + "-uuid",
		ToAllocate:  hamiPrefix + commonWord + "-devices-to-allocate",
		Allocated:   hamiPrefix + commonWord + "-devices-allocated",
		RuntimeInfo: huaweiPrefix + commonWord,
	}
}
