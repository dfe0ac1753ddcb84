package agent

import (
	"path/filepath"
	"strconv"
	"strings"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// The hami-vnpu-core (soft slicing) environment and paths HAMi's Ascend
// device plugin sets up.
const (
	// EnvMemQuota is the container's memory limit in MiB.
	EnvMemQuota = "NPU_MEM_QUOTA"
	// EnvPriority is the container's AI-core percent.
	EnvPriority = "NPU_PRIORITY"
	// EnvGlobalShm is the chip's shared registry inside the container.
	EnvGlobalShm = "NPU_GLOBAL_SHM_PATH"
	// EnvLocalShm is the container's own shared region.
	EnvLocalShm = "NPU_LOCAL_SHM_PATH"

	containerHookDir     = "/hami-vnpu-core"
	containerPreload     = "/etc/ld.so.preload"
	containerSharedDir   = "/hami-shared-region"
	containerLocalShmDir = "/hami-vnpu-shmem"
	localShmFile         = "vnpu_local_shmem"
	// hostSharedDir is the host directory of the chips' shared registries.
	hostSharedDir = "/usr/local/hami-shared-region"
)

// respond builds the container's response: ASCEND_VISIBLE_DEVICES with the
// chips' physical IDs, then the template (template mode) or the
// hami-vnpu-core limits and mounts (hami-core mode). A pod's
// huawei.com/vnpu-mode hami-core selects hami-core; without it the node's
// mode applies, as in HAMi's plugin.
func (a *Allocator) respond(c *candidate) *pluginapi.ContainerAllocateResponse {
	entry := c.Entry()
	ids := make([]string, len(entry))
	for i, card := range entry {
		chip, _ := a.opts.Inventory.Chip(card.UUID) // check made sure it exists
		ids[i] = strconv.Itoa(chip.PhyID)
	}
	resp := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{ascendproto.EnvVisibleDevices: strings.Join(ids, ",")}}
	mode := c.Pod.Annotations[ascendproto.AnnotationVNPUMode]
	if mode == ascendproto.ModeHAMiCore || (mode == "" && a.opts.Inventory.HAMiCore()) {
		a.softSlicing(resp, c, ids[0])
		return resp
	}
	for _, card := range entry {
		if t := c.runtime[card.UUID].Temp; t != "" {
			resp.Envs[ascendproto.EnvVNPUSpecs] = t
			break
		}
	}
	return resp
}

// softSlicing adds the hami-vnpu-core limits (from the first card's
// runtime entry, as HAMi's plugin reads them) and mounts.
func (a *Allocator) softSlicing(resp *pluginapi.ContainerAllocateResponse, c *candidate, firstPhyID string) {
	first := c.runtime[c.Entry()[0].UUID]
	if first.Memory != nil {
		resp.Envs[EnvMemQuota] = strconv.FormatInt(*first.Memory, 10)
	}
	if first.Core != nil {
		resp.Envs[EnvPriority] = strconv.FormatInt(int64(*first.Core), 10)
	}
	resp.Envs[EnvGlobalShm] = containerSharedDir + "/" + firstPhyID + "_global_registry"
	resp.Envs[EnvLocalShm] = containerLocalShmDir + "/" + localShmFile
	hook := a.opts.HookDir
	resp.Mounts = []*pluginapi.Mount{
		{HostPath: hook, ContainerPath: containerHookDir, ReadOnly: true},
		{HostPath: filepath.Join(hook, "ld.so.preload"), ContainerPath: containerPreload, ReadOnly: true},
		{HostPath: hostSharedDir, ContainerPath: containerSharedDir},
		{HostPath: filepath.Join(hook, "containers", string(c.Pod.UID)+"_"+c.Container.Name), ContainerPath: containerLocalShmDir},
	}
}
