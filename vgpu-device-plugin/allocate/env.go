package allocate

import "github.com/vgpushare/vshare/protocol/vgpuproto"

// Container environment the agent sets (read by libvgpu and the NVIDIA
// container runtime).
const (
	EnvVisibleDevices    = "NVIDIA_VISIBLE_DEVICES"
	EnvMemoryLimitPrefix = "CUDA_DEVICE_MEMORY_LIMIT_"
	EnvSMLimit           = "CUDA_DEVICE_SM_LIMIT"
	EnvSharedCache       = "CUDA_DEVICE_MEMORY_SHARED_CACHE"
	EnvTaskPriority      = "CUDA_TASK_PRIORITY"
	EnvLogLevel          = "LIBCUDA_LOG_LEVEL"
	EnvCorePolicy        = "GPU_CORE_UTILIZATION_POLICY"
	EnvOversubscribe     = "CUDA_OVERSUBSCRIBE"
	// EnvDisableControl set to "true" in a container's spec keeps libvgpu
	// out of it (no /etc/ld.so.preload mount).
	EnvDisableControl = vgpuproto.EnvDisableControl
)

// Paths inside the container.
const (
	ContainerLibPath     = vgpuproto.ContainerLibPath
	ContainerCacheDir    = vgpuproto.ContainerCacheDir
	ContainerPreloadPath = vgpuproto.ContainerPreloadPath
)
