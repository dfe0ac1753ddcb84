package vgpu

import (
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Name is the backend's name, equal to upstream Volcano's vGPU device name
// ("hamivgpu"); it is also the node lock key (see LockName).
const Name = "hamivgpu"

// AnnotationGroupName is the PodGroup a pod belongs to (set by Volcano);
// volcano.sh/vgpu-podgroup-policy spread keeps its members apart.
const AnnotationGroupName = request.AnnotationGroupName

// PolicyTopologyAware is the card policy (hami.io/gpu-scheduler-policy)
// that chooses multi-card sets with the best links.
const PolicyTopologyAware = request.PolicyTopologyAware

// Task priority (request/priority.go): a container's limit of the
// priority resource (nvidia.resourcePriorityName, default
// volcano.sh/vgpu-priority) says 0 for high or 1 for low, as in HAMi; the
// scheduler only validates it, the node agent passes it to the container.
const (
	// PriorityHigh is the value of a high-priority task.
	PriorityHigh = request.PriorityHigh
	// PriorityLow is the value of a low-priority task, also what a
	// container that names no priority runs as.
	PriorityLow = request.PriorityLow
)

// Filter failure reasons, short and stable across nodes so that Volcano's
// fit-error histogram groups them.
const (
	ReasonUnhealthy        = "vGPU card unhealthy"
	ReasonCordoned         = "vGPU card cordoned by node annotation volcano.sh/vgpu-cordon or hami.io/device-cordon"
	ReasonModeMismatch     = "vGPU card in another mode than volcano.sh/vgpu-mode asks"
	ReasonTypeMismatch     = "vGPU card type excluded by nvidia.com/use-gputype or nouse-gputype"
	ReasonUUIDExcluded     = "vGPU card excluded by vgpu-use-gpuuuid or vgpu-nouse-gpuuuid"
	ReasonShareCountFull   = "vGPU card shared by its maximum number of pods"
	ReasonCardTooSmall     = "vGPU card memory smaller than requested"
	ReasonInsufficientMem  = "insufficient vGPU memory on card"
	ReasonInsufficientCore = "insufficient vGPU cores on card"
	ReasonExclusiveBusy    = "vGPU card in use; vgpu-cores=100 needs an unused card"
	ReasonCardCoresFull    = "vGPU card fully allocated by cores; a cores=0 request cannot share it"
	ReasonExclusiveRule    = "vGPU card holds a pod of the same deviceshare.GPUExclusiveRules rule"
	ReasonGangOnCard       = "vGPU card already holds a member of the pod's PodGroup (podgroup-policy spread)"
	ReasonNoMIGInstance    = "no MIG instance of the card's geometries is large enough"
	ReasonMIGBusy          = "no free MIG instance fits in the card's current geometry"
	ReasonTooFewCards      = "node has fewer vGPU cards than requested"
	ReasonNUMASplit        = "not enough fitting vGPU cards on one NUMA node (nvidia.com/numa-bind)"
	ReasonTooFewFitting    = "fewer fitting vGPU cards than requested"
	// ReasonInitAgent: the node's agent would serve an init container
	// another container's cards (see inventory.Inventory.InitAgent).
	ReasonInitAgent = "node agent (volcano-vgpu-device-plugin) does not serve vGPUs to init containers"
	// ReasonReusedCard: a container after a regular init container gets
	// that container's cards again from the kubelet, and one does not fit
	// it (see package request, init.go).
	ReasonReusedCard = "vGPU card an init container leaves to the next container does not fit it"
)

// Limits on requests; the limits on decoded annotations are
// protocol/vgpuproto's.
const (
	// MaxGPUsPerContainer is the largest vgpu-number a container may ask for.
	MaxGPUsPerContainer = vgpuproto.MaxCards
	// fullCores is a whole card's cores in percent.
	fullCores = request.FullCores
)
