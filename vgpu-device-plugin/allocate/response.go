package allocate

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// PreloadFileName is the ld.so.preload file the agent keeps in CacheHostDir.
const PreloadFileName = "ld.so.preload"

// ContainersDir is the subdirectory of CacheHostDir holding one directory
// per container, named "<pod UID>_<container name>".
const ContainersDir = "containers"

// respond builds the container's response for the candidate's entry.
func (a *Allocator) respond(c *candidate, inv *nvidia.Inventory, uses map[string]*cardUse) (*pluginapi.ContainerAllocateResponse, error) {
	entry := c.Entry()
	resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}}
	visible := make([]string, 0, len(entry))
	migs := 0
	for _, d := range entry {
		if !d.IsMIG() {
			visible = append(visible, d.UUID)
			continue
		}
		migs++
		id, err := a.migInstance(c, d, inv, uses[d.UUID])
		if err != nil {
			return nil, err
		}
		visible = append(visible, id)
	}
	resp.Envs[EnvVisibleDevices] = strings.Join(visible, ",")
	if a.opts.PassDeviceSpecs {
		resp.Devices = deviceSpecs(entry, inv)
	}
	switch migs {
	case len(entry):
		return resp, nil // MIG isolates in hardware: no libvgpu
	case 0:
	default:
		return nil, fmt.Errorf("pod %s container %s: mixes MIG instances and shared cards: %w", c.Pod.Name, c.Container.Name, ErrForged)
	}
	switch n := mpsCards(entry, inv); n {
	case len(entry):
		a.mps(resp, c, inv) // the node's MPS daemon enforces the shares: no libvgpu
		return resp, nil
	case 0:
	default:
		return nil, fmt.Errorf("pod %s container %s: mixes cards in MPS mode and cards shared by libvgpu: %w", c.Pod.Name, c.Container.Name, ErrForged)
	}
	if wholeCards(entry, inv) {
		return resp, nil // nothing to enforce: libvgpu stays out of the way
	}
	if err := a.libvgpu(resp, c, inv); err != nil {
		return nil, err
	}
	return resp, nil
}

// wholeCards reports whether the container has every card of the entry to
// itself (nvidia.Inventory.Whole). It then has nothing for libvgpu to
// enforce and gets neither the preload nor a region (libvgpu/README.md,
// "Whole cards": the first context costs 3-9x more under libvgpu, and NCCL
// and vLLM then run without an interposer).
func wholeCards(entry []vgpuproto.Device, inv *nvidia.Inventory) bool {
	for _, d := range entry {
		if !inv.Whole(d.UUID, inv.ToMiB(d.Mem), d.Cores) {
			return false
		}
	}
	return true
}

// migInstance provides the MIG device of a MIG entry.
func (a *Allocator) migInstance(c *candidate, d vgpuproto.Device, inv *nvidia.Inventory, u *cardUse) (string, error) {
	if a.opts.MIG == nil {
		return "", fmt.Errorf("pod %s: MIG instance on %s, but MIG is not managed on this node: %w", c.Pod.Name, d.UUID, ErrMIG)
	}
	card, _ := inv.Card(d.UUID)
	others := false
	for slot, n := range u.mig {
		if n > 0 && slot != (migSlot{d.MIGGroup, d.MIGPos}) {
			others = true
		}
	}
	id, err := a.opts.MIG.Apply(card, inv.NVIDIA.KnownMIGGeometries, d.MIGGroup, d.MIGPos, others)
	if err != nil {
		return "", fmt.Errorf("pod %s: MIG instance %s[%s-%d]: %w: %w", c.Pod.Name, d.UUID, d.MIGGroup, d.MIGPos, ErrMIG, err)
	}
	return id, nil
}

// libvgpu adds libvgpu's limits, shared region and mounts.
func (a *Allocator) libvgpu(resp *pluginapi.ContainerAllocateResponse, c *candidate, inv *nvidia.Inventory) error {
	entry := c.Entry()
	nv, s := inv.NVIDIA, inv.Settings
	for i, d := range entry {
		resp.Envs[EnvMemoryLimitPrefix+strconv.Itoa(i)] = strconv.FormatInt(inv.ToMiB(d.Mem), 10) + "m"
	}
	if !nv.DisableCoreLimit {
		resp.Envs[EnvSMLimit] = strconv.Itoa(int(entry[0].Cores))
	}
	region := a.opts.NewID() + ".cache"
	resp.Envs[EnvSharedCache] = ContainerCacheDir + "/" + region
	p, ok, err := taskPriority(c.Container, nv.ResourcePriorityName)
	if err != nil {
		return fmt.Errorf("pod %s %w", c.Pod.Name, err)
	}
	if ok {
		resp.Envs[EnvTaskPriority] = p
	}
	if s.LibCudaLogLevel != "" {
		resp.Envs[EnvLogLevel] = string(s.LibCudaLogLevel)
	}
	if nv.GPUCorePolicy != "" && nv.GPUCorePolicy != "default" {
		resp.Envs[EnvCorePolicy] = nv.GPUCorePolicy
	}
	if inv.OverCommitted() {
		resp.Envs[EnvOversubscribe] = "true"
	}
	// The agent creates the region itself, in a directory the container
	// cannot write to (see cachedir.go).
	cards := make([]string, len(entry))
	for i, d := range entry {
		cards[i] = d.UUID
	}
	dir, err := createRegion(a.opts.CacheHostDir, string(c.Pod.UID), c.Container.Name, region, cards, ownerOf(c.Pod, c.Container))
	if err != nil {
		return fmt.Errorf("pod %s container %s: shared region: %w", c.Pod.Name, c.Container.Name, err)
	}
	if a.opts.RegionCreated != nil {
		a.opts.RegionCreated()
	}
	resp.Mounts = append(resp.Mounts,
		&pluginapi.Mount{ContainerPath: ContainerLibPath, HostPath: a.opts.LibvgpuHostPath, ReadOnly: true},
		&pluginapi.Mount{ContainerPath: ContainerCacheDir, HostPath: dir},
	)
	if !controlDisabled(c.Container) {
		resp.Mounts = append(resp.Mounts, &pluginapi.Mount{ContainerPath: ContainerPreloadPath,
			HostPath: filepath.Join(a.opts.CacheHostDir, PreloadFileName), ReadOnly: true})
	}
	return nil
}

// controlDisabled reports whether the container sets CUDA_DISABLE_CONTROL=true.
func controlDisabled(ctr *v1.Container) bool {
	for _, e := range ctr.Env {
		if e.Name == EnvDisableControl {
			b, err := strconv.ParseBool(e.Value)
			return err == nil && b
		}
	}
	return false
}

// deviceSpecs are the device nodes of the entry's cards.
func deviceSpecs(entry []vgpuproto.Device, inv *nvidia.Inventory) []*pluginapi.DeviceSpec {
	paths := []string{"/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}
	for _, d := range entry {
		if card, ok := inv.Card(d.UUID); ok && card.Minor >= 0 {
			paths = append(paths, "/dev/nvidia"+strconv.Itoa(card.Minor))
		}
	}
	specs := make([]*pluginapi.DeviceSpec, 0, len(paths))
	for _, p := range paths {
		specs = append(specs, &pluginapi.DeviceSpec{ContainerPath: p, HostPath: p, Permissions: "rw"})
	}
	return specs
}
