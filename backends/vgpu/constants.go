package vgpu

// Name is the backend's name, equal to upstream Volcano's vGPU device name
// ("hamivgpu"); it is also the node lock key (see LockName).
const Name = "hamivgpu"

// Node annotations.
const (
	// AnnotationRegister is the vGPU node agent's registration, one entry per
	// card: "UUID,count,devmemMiB,type,health,mode:" (mode is absent in
	// agents older than MIG support).
	AnnotationRegister = "volcano.sh/node-vgpu-register"
	// AnnotationHandshake is the node agent's handshake. Only the value
	// "Deleted_<time>" (written by upstream's scheduler when the agent stopped
	// reporting) matters here: such a node has no usable vGPUs.
	AnnotationHandshake = "volcano.sh/node-vgpu-handshake"
	// AnnotationHAMiRegister is HAMi's NVIDIA registration: a JSON list of
	// {id, index, count, devmem, devcore, type, numa, mode, health}, or the
	// older "id,count,devmem,devcore,type,numa,health[,index,mode]:" form.
	AnnotationHAMiRegister = "hami.io/node-nvidia-register"
	// AnnotationHAMiScore is HAMi's pairwise link score between cards: a JSON
	// list of {uuid, score: {uuid: int}}; higher means better links (NVLink).
	AnnotationHAMiScore = "hami.io/node-nvidia-score"
)

// Pod annotations written by Allocate (they travel on the v1.Binding).
const (
	// AnnotationIDs records the allocation: per container the cards as
	// "UUID,NVIDIA,memMiB,cores:", containers separated by ";". MIG
	// instances are "UUID[group-pos]". The ledger accounts pods from it.
	AnnotationIDs = "volcano.sh/vgpu-ids-new"
	// AnnotationToAllocate is the same value; the node agent consumes it
	// container by container.
	AnnotationToAllocate = "volcano.sh/devices-to-allocate"
	// AnnotationNode names the node the cards were chosen on.
	AnnotationNode = "volcano.sh/vgpu-node"
	// AnnotationTime is when the cards were chosen, in Unix seconds; the node
	// agent serves the oldest pending pod first.
	AnnotationTime = "volcano.sh/vgpu-time"
	// AnnotationBindPhase is "allocating" until the node agent moves it to
	// "success" or "failed".
	AnnotationBindPhase = "volcano.sh/bind-phase"
	// AnnotationBindTime is when the bind started, in Unix seconds.
	AnnotationBindTime = "volcano.sh/bind-time"
	// BindPhaseAllocating is the bind phase Allocate writes.
	BindPhaseAllocating = "allocating"
)

// Pod annotations users set.
const (
	// AnnotationMode asks for cards in one operating mode: "hami-core" or "mig".
	AnnotationMode = "volcano.sh/vgpu-mode"
	// AnnotationUseType keeps only cards whose type contains one of the
	// comma-separated values (case-insensitive).
	AnnotationUseType = "nvidia.com/use-gputype"
	// AnnotationNoUseType excludes cards whose type contains one of the values.
	AnnotationNoUseType = "nvidia.com/nouse-gputype"
	// AnnotationUseUUID keeps only the cards with the listed UUIDs.
	AnnotationUseUUID = "volcano.sh/vgpu-use-gpuuuid"
	// AnnotationNoUseUUID excludes the cards with the listed UUIDs.
	AnnotationNoUseUUID = "volcano.sh/vgpu-nouse-gpuuuid"
	// AnnotationPodGroupPolicy set to "spread" keeps members of one PodGroup
	// off the same physical card.
	AnnotationPodGroupPolicy = "volcano.sh/vgpu-podgroup-policy"
	// AnnotationGPUPolicy picks the card policy for this pod: binpack, spread
	// or topology-aware (HAMi's key).
	AnnotationGPUPolicy = "hami.io/gpu-scheduler-policy"
	// AnnotationNodePolicy picks the node policy for this pod: binpack or
	// spread (HAMi's key).
	AnnotationNodePolicy = "hami.io/node-scheduler-policy"
	// AnnotationNUMABind set to true puts all cards of a container on one
	// NUMA node (HAMi's key).
	AnnotationNUMABind = "nvidia.com/numa-bind"
	// AnnotationGroupName is the PodGroup a pod belongs to (set by Volcano).
	AnnotationGroupName = "scheduling.k8s.io/group-name"
)

// Values of the pod annotations.
const (
	// ModeHAMiCore shares cards through libvgpu.
	ModeHAMiCore = "hami-core"
	// ModeMIG hands out MIG instances.
	ModeMIG = "mig"
	// ModeMPS is HAMi's MPS mode; cards registered in it are shared like
	// hami-core cards.
	ModeMPS = "mps"
	// PodGroupPolicySpread is the value of AnnotationPodGroupPolicy that
	// spreads a gang's members over cards.
	PodGroupPolicySpread = "spread"
	// PolicyTopologyAware chooses multi-card sets with the best links.
	PolicyTopologyAware = "topology-aware"
	// DeviceTypeNVIDIA is the device type recorded in allocations.
	DeviceTypeNVIDIA = "NVIDIA"
)

// Filter failure reasons, short and stable across nodes so that Volcano's
// fit-error histogram groups them.
const (
	ReasonUnhealthy        = "vGPU card unhealthy"
	ReasonModeMismatch     = "vGPU card in another mode than volcano.sh/vgpu-mode asks"
	ReasonTypeMismatch     = "vGPU card type excluded by nvidia.com/use-gputype or nouse-gputype"
	ReasonUUIDExcluded     = "vGPU card excluded by vgpu-use-gpuuuid or vgpu-nouse-gpuuuid"
	ReasonShareCountFull   = "vGPU card shared by its maximum number of pods"
	ReasonCardTooSmall     = "vGPU card memory smaller than requested"
	ReasonInsufficientMem  = "insufficient vGPU memory on card"
	ReasonInsufficientCore = "insufficient vGPU cores on card"
	ReasonExclusiveBusy    = "vGPU card in use; vgpu-cores=100 needs an unused card"
	ReasonCardCoresFull    = "vGPU card fully allocated by cores; a cores=0 request cannot share it"
	ReasonGangOnCard       = "vGPU card already holds a member of the pod's PodGroup (podgroup-policy spread)"
	ReasonNoMIGInstance    = "no MIG instance of the card's geometries is large enough"
	ReasonMIGBusy          = "no free MIG instance fits in the card's current geometry"
	ReasonTooFewCards      = "node has fewer vGPU cards than requested"
	ReasonNUMASplit        = "not enough fitting vGPU cards on one NUMA node (nvidia.com/numa-bind)"
	ReasonTooFewFitting    = "fewer fitting vGPU cards than requested"
)

// Limits on decoded values, far above real nodes and pods, keeping sums in
// range.
const (
	// MaxCards is the most cards a node may register.
	MaxCards = 256
	// MaxShareCount is the most pods one card may be shared by.
	MaxShareCount = 1000
	// MaxMemoryMiB is the largest card or request memory accepted (1 PiB).
	MaxMemoryMiB = int64(1) << 30
	// MaxGPUsPerContainer is the largest vgpu-number a container may ask for.
	MaxGPUsPerContainer = MaxCards
	// fullCores is a whole card's cores in percent.
	fullCores = 100
)
