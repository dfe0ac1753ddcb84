package ascendproto

// Annotation key parts; the full keys embed the chip type's commonWord (see
// KeysFor).
const (
	// hamiPrefix is HAMi's annotation domain.
	hamiPrefix = "hami.io/"
	// RegisterPrefix plus the commonWord is the registration key; the
	// commonWord must keep it a valid annotation key.
	RegisterPrefix = hamiPrefix + "node-register-"
	// ResourceDomain is the domain of the runtime-info annotation and of the
	// resources HAMi's Ascend device plugin advertises by default:
	// huawei.com/<commonWord>, with -memory and -core for the memory and
	// AI-core resources.
	ResourceDomain = "huawei.com/"
)

// Keys are the annotation keys of one chip type.
type Keys struct {
	// Register is the node registration: hami.io/node-register-<commonWord>.
	Register string
	// Handshake is hami.io/node-handshake-<commonWord>; see AgentDeleted.
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
		Register:    RegisterPrefix + commonWord,
		Handshake:   hamiPrefix + "node-handshake-" + commonWord,
		UseUUID:     hamiPrefix + "use-" + commonWord + "-uuid",
		NoUseUUID:   hamiPrefix + "no-use-" + commonWord + "-uuid",
		ToAllocate:  hamiPrefix + commonWord + "-devices-to-allocate",
		Allocated:   hamiPrefix + commonWord + "-devices-allocated",
		RuntimeInfo: ResourceDomain + commonWord,
	}
}

// Node annotations that do not depend on the chip type.
const (
	// AnnotationNodeHAMiCore is written by HAMi's ascend-device-plugin:
	// "true" when the node runs in hami-vnpu-core (soft slicing) mode,
	// "false" when it slices by templates.
	AnnotationNodeHAMiCore = "hami-vnpu-core"
	// NodeLockName is the node lock HAMi's scheduler takes for Ascend and
	// its device plugin releases (HAMi NodeLockAscend).
	NodeLockName = "hami.io/mutex.lock"
)

// Handshake values (hami.io/node-handshake-<commonWord>): the agent writes
// HandshakeReported plus the time; HAMi's scheduler writes
// HandshakeRequesting or HandshakeDeleted plus the time. HandshakeLayout is
// the time layout of all three.
const (
	HandshakeReported   = "Reported_"
	HandshakeRequesting = "Requesting_"
	HandshakeDeleted    = "Deleted_"
	HandshakeLayout     = "2006.01.02 15:04:05"
)

// Pod annotations the scheduler writes with the allocation that do not
// depend on the chip type (HAMi util: AssignedNodeAnnotations,
// AssignedTimeAnnotations, DeviceBindPhase, BindTimeAnnotations; and
// "predicate-time").
const (
	AnnotationAssignedNode = "hami.io/vgpu-node"
	AnnotationAssignedTime = "hami.io/vgpu-time"
	AnnotationBindPhase    = "hami.io/bind-phase"
	AnnotationBindTime     = "hami.io/bind-time"
	AnnotationPredicate    = "predicate-time"
)

// Values of hami.io/bind-phase.
const (
	// BindPhaseAllocating is the bind phase the scheduler writes.
	BindPhaseAllocating = "allocating"
	// BindPhaseSuccess is written by the device plugin once it served every
	// container of the pod.
	BindPhaseSuccess = "success"
	// BindPhaseFailed is written by the device plugin when it refused the
	// allocation.
	BindPhaseFailed = "failed"
)

// Pod annotations users set.
const (
	// AnnotationVNPUMode set to ModeHAMiCore asks for soft slicing by memory
	// and AI-core percentage instead of templates.
	AnnotationVNPUMode = "huawei.com/vnpu-mode"
	// ModeHAMiCore is the value of AnnotationVNPUMode for soft slicing.
	ModeHAMiCore = "hami-core"
)

// Container environment HAMi's Ascend device plugin returns from Allocate.
const (
	// EnvVisibleDevices lists the physical chip IDs, comma-separated.
	EnvVisibleDevices = "ASCEND_VISIBLE_DEVICES"
	// EnvVNPUSpecs names the template the runtime slices (template mode).
	EnvVNPUSpecs = "ASCEND_VNPU_SPECS"
)

// AnnotationDeviceCordon is HAMi's per-card cordon (Project-HAMi/HAMi pull
// request #2298, pkg/device DeviceCordonAnnotation, read by every vendor's
// Fit): a node annotation listing card IDs, comma-separated, that new pods
// must not get; pods holding them keep them.
const AnnotationDeviceCordon = "hami.io/device-cordon"
