package vgpuproto

// Node annotations.
const (
	// AnnotationRegister is the vGPU node agent's registration, one entry per
	// card: "UUID,count,devmem,type,health,mode,numa:" (mode is absent in
	// agents older than MIG support, numa in all but this project's). See
	// DecodeRegister.
	AnnotationRegister = "volcano.sh/node-vgpu-register"
	// AnnotationHandshake is the node agent's handshake: the agent writes
	// HandshakeReported plus the time, upstream's scheduler
	// "Requesting_<time>" and, when the agent stopped reporting,
	// "Deleted_<time>" (see AgentDeleted).
	AnnotationHandshake = "volcano.sh/node-vgpu-handshake"
	// AnnotationMIGGeometry is this project's addition to the registration:
	// per mig-mode card "UUID,group:", the catalogue group its MIG instances
	// form (empty when none). See EncodeMIGGeometry.
	AnnotationMIGGeometry = "volcano.sh/node-vgpu-mig-geometry"
	// AnnotationHAMiRegister is HAMi's NVIDIA registration: a JSON list of
	// {id, index, count, devmem, devcore, type, numa, mode, health}, or the
	// older "id,count,devmem,devcore,type,numa,health[,index,mode]:" form.
	// See DecodeHAMiRegister.
	AnnotationHAMiRegister = "hami.io/node-nvidia-register"
	// AnnotationHAMiScore is HAMi's pairwise link score between cards: a JSON
	// list of {uuid, score: {uuid: int}}; higher means better links (NVLink).
	// See DecodeScores.
	AnnotationHAMiScore = "hami.io/node-nvidia-score"
)

// Handshake values.
const (
	// HandshakeReported starts the agent's handshake value.
	HandshakeReported = "Reported_"
	// HandshakeLayout is the time layout of every handshake value.
	HandshakeLayout = "2006.01.02 15:04:05"
	// handshakeDeleted starts the value upstream's scheduler writes when the
	// agent stopped reporting ("Deleted_<time>").
	handshakeDeleted = "Deleted"
)

// Pod annotations the scheduler writes with the allocation (they travel on
// the v1.Binding).
const (
	// AnnotationIDs records the allocation: per container the cards as
	// "UUID,NVIDIA,mem,cores:", containers separated by ";". MIG instances
	// are "UUID[group-pos]". See DecodeAllocation.
	AnnotationIDs = "volcano.sh/vgpu-ids-new"
	// AnnotationToAllocate is the same value; the node agent consumes it
	// container by container (see Consume).
	AnnotationToAllocate = "volcano.sh/devices-to-allocate"
	// AnnotationNode names the node the cards were chosen on.
	AnnotationNode = "volcano.sh/vgpu-node"
	// AnnotationTime is when the cards were chosen, in Unix seconds; the node
	// agent serves the oldest pending pod first.
	AnnotationTime = "volcano.sh/vgpu-time"
	// AnnotationBindPhase is BindPhaseAllocating until the node agent moves
	// it to BindPhaseSuccess or BindPhaseFailed.
	AnnotationBindPhase = "volcano.sh/bind-phase"
	// AnnotationBindTime is when the bind started, in Unix seconds.
	AnnotationBindTime = "volcano.sh/bind-time"
)

// Values of volcano.sh/bind-phase.
const (
	// BindPhaseAllocating is the bind phase the scheduler writes.
	BindPhaseAllocating = "allocating"
	// BindPhaseSuccess is written by the agent once every container of the
	// pod was served.
	BindPhaseSuccess = "success"
	// BindPhaseFailed is written by the agent when it refused the allocation.
	BindPhaseFailed = "failed"
)

// DeviceTypeNVIDIA is the device type of NVIDIA cards in allocations.
const DeviceTypeNVIDIA = "NVIDIA"

// Pod annotations users set.
const (
	// AnnotationMode asks for cards in one operating mode: ModeHAMiCore,
	// ModeMIG or ModeMPS.
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
	// AnnotationPodGroupPolicy set to PodGroupPolicySpread keeps members of
	// one PodGroup off the same physical card.
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
)

// Values of the pod annotations and of a card's registered mode.
const (
	// ModeHAMiCore shares cards through libvgpu.
	ModeHAMiCore = "hami-core"
	// ModeMIG hands out MIG instances.
	ModeMIG = "mig"
	// ModeMPS is HAMi's MPS mode; the scheduler shares cards registered in
	// it like hami-core cards, and this project's agent serves them through
	// the node's CUDA MPS daemon (vgpu-device-plugin/allocate/mps.go).
	ModeMPS = "mps"
	// PodGroupPolicySpread is the value of AnnotationPodGroupPolicy that
	// spreads a gang's members over cards.
	PodGroupPolicySpread = "spread"
)

// Default names of the pod resources (the device ConfigMap's nvidia:
// section may rename them).
const (
	// ResourceNumber is the number of cards a container asks for.
	ResourceNumber = "volcano.sh/vgpu-number"
	// ResourceMemory is the memory per card.
	ResourceMemory = "volcano.sh/vgpu-memory"
	// ResourceMemoryPercentage is the memory as a percentage of each card.
	ResourceMemoryPercentage = "volcano.sh/vgpu-memory-percentage"
	// ResourceCores is the percentage of each card's SMs.
	ResourceCores = "volcano.sh/vgpu-cores"
	// ResourcePriority is the task priority libvgpu applies.
	ResourcePriority = "volcano.sh/vgpu-priority"
)
