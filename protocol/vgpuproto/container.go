package vgpuproto

// What the agent's Allocate answer puts into a container with a vGPU share,
// and what the admission webhook keeps containers from overriding: the
// paths libvgpu is mounted at and reads, and the variable that keeps
// libvgpu out.
const (
	// ContainerLibPath is libvgpu.so in the container.
	ContainerLibPath = "/usr/local/vgpu/libvgpu.so"
	// ContainerCacheDir is the directory of the container's shared region.
	ContainerCacheDir = "/tmp/vgpu"
	// ContainerPreloadPath is the preload file that loads libvgpu into
	// every dynamically linked process.
	ContainerPreloadPath = "/etc/ld.so.preload"
	// EnvDisableControl set to "true" in a container's spec keeps libvgpu
	// out of it (no /etc/ld.so.preload mount, no limits).
	EnvDisableControl = "CUDA_DISABLE_CONTROL"
)
