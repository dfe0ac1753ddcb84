package allocate

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// Environment of a container on cards in MPS mode, read by the CUDA driver's
// MPS client (NVIDIA, "Multi-Process Service", Appendix: Environment
// Variables, https://docs.nvidia.com/deploy/mps/).
const (
	// EnvMPSPipeDirectory is where the client finds the control daemon's
	// pipes and sockets; it must be the daemon's directory.
	EnvMPSPipeDirectory = "CUDA_MPS_PIPE_DIRECTORY"
	// EnvMPSLogDirectory is the control daemon's log directory.
	EnvMPSLogDirectory = "CUDA_MPS_LOG_DIRECTORY"
	// EnvMPSActiveThreadPercentage caps the share of the SMs the client's
	// contexts may use, in percent, on every card it sees.
	EnvMPSActiveThreadPercentage = "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"
	// EnvMPSPinnedDeviceMemLimit caps the device memory the client may
	// allocate, per device: "<ordinal>=<N>M,..." with the CUDA device
	// ordinal as the client enumerates its visible devices (Volta and
	// later; pre-Volta MPS has no memory limit).
	EnvMPSPinnedDeviceMemLimit = "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"
	// EnvMPSClientPriority is the client's stream priority under MPS: 0
	// normal, 1 below normal (HAMi's task priority: 0 high, 1 low).
	EnvMPSClientPriority = "CUDA_MPS_CLIENT_PRIORITY"
)

// Paths of the node's MPS control daemon, under Options.MPSHostRoot on the
// host (the chart's MPS daemon creates them) and in the container.
const (
	// MPSPipeSubdir, MPSLogSubdir and MPSShmSubdir are the pipe, log and
	// shared-memory directories under the host root.
	MPSPipeSubdir = "pipe"
	MPSLogSubdir  = "log"
	MPSShmSubdir  = "shm"
	// ContainerMPSPipeDir and ContainerMPSLogDir are MPS's default pipe and
	// log directories, so that a client which drops the variables still
	// finds the daemon.
	ContainerMPSPipeDir = "/tmp/nvidia-mps"
	ContainerMPSLogDir  = "/var/log/nvidia-mps"
	// ContainerShmDir is the client's /dev/shm: the daemon's, as NVIDIA's
	// device plugin shares it with MPS clients (k8s-device-plugin,
	// internal/plugin/mps.go, updateReponse).
	ContainerShmDir = "/dev/shm"
)

// DefaultMPSHostRoot is the host directory of the MPS control daemon's
// pipe, log and shm directories, NVIDIA's device plugin's default MPS root.
const DefaultMPSHostRoot = "/run/nvidia/mps"

// mpsCards counts the entry's cards registered in MPS mode.
func mpsCards(entry []vgpuproto.Device, inv *nvidia.Inventory) int {
	n := 0
	for _, d := range entry {
		if card, ok := inv.Card(d.UUID); ok && card.Mode == config.OperatingModeMPS {
			n++
		}
	}
	return n
}

// mps fills the answer for a container on cards in MPS mode: the node's MPS
// control daemon enforces the shares (threads and pinned memory per client),
// so libvgpu is not injected, unlike HAMi, whose device plugin injects
// HAMi-core in every mode but mig
// (pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go, Allocate).
// Two limiters on one card would throttle twice, and under MPS the clients'
// work runs in the MPS server's context, which libvgpu's per-process
// accounting does not see.
func (a *Allocator) mps(resp *pluginapi.ContainerAllocateResponse, c *candidate, inv *nvidia.Inventory) {
	entry := c.Entry()
	nv := inv.NVIDIA
	resp.Envs[EnvMPSPipeDirectory] = ContainerMPSPipeDir
	resp.Envs[EnvMPSLogDirectory] = ContainerMPSLogDir
	// One percentage for all the container's cards; the scheduler gives
	// every card of a container the same cores. 0 reserves nothing and 100
	// or more is the whole card: no cap either way.
	if cores := entry[0].Cores; !nv.DisableCoreLimit && cores > 0 && cores < 100 {
		resp.Envs[EnvMPSActiveThreadPercentage] = strconv.Itoa(int(cores))
	}
	var limits []string
	for i, d := range entry {
		if mib := inv.ToMiB(d.Mem); mib > 0 {
			// Ordinal i: the container sees its cards in the entry's order,
			// the convention CUDA_DEVICE_MEMORY_LIMIT_<i> follows too.
			limits = append(limits, fmt.Sprintf("%d=%dM", i, mib))
		}
	}
	if len(limits) > 0 {
		resp.Envs[EnvMPSPinnedDeviceMemLimit] = strings.Join(limits, ",")
	}
	if p, ok := limit(c.Container, nv.ResourcePriorityName); ok && (p == 0 || p == 1) {
		resp.Envs[EnvMPSClientPriority] = strconv.FormatInt(p, 10)
	}
	root := a.opts.MPSHostRoot
	resp.Mounts = append(resp.Mounts,
		&pluginapi.Mount{ContainerPath: ContainerMPSPipeDir, HostPath: filepath.Join(root, MPSPipeSubdir)},
		&pluginapi.Mount{ContainerPath: ContainerMPSLogDir, HostPath: filepath.Join(root, MPSLogSubdir), ReadOnly: true},
		&pluginapi.Mount{ContainerPath: ContainerShmDir, HostPath: filepath.Join(root, MPSShmSubdir)},
	)
}
