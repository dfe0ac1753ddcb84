package nvidia

import (
	"errors"
	"fmt"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
)

// GPU is one physical GPU as NVML reports it.
type GPU struct {
	// UUID is NVML's UUID ("GPU-...").
	UUID string
	// Index is NVML's device index.
	Index int
	// Minor is the /dev/nvidia<minor> number, -1 when unknown.
	Minor int
	// Name is the product name, like "NVIDIA A100-SXM4-40GB".
	Name string
	// MemoryMiB is the total device memory.
	MemoryMiB int64
	// NUMANode is the NUMA node the GPU is attached to, -1 when unknown.
	NUMANode int
	// MIGCapable reports whether the GPU supports MIG.
	MIGCapable bool
	// MIGEnabled reports whether MIG mode is currently on.
	MIGEnabled bool
	// Links are the GPU's links to every GPU, by NVML index (the entry for
	// itself is zero); nil when not discovered.
	Links []Link
}

// Discover enumerates the GPUs and their topology (topology.go). NVML must
// be initialised. Optional facts a driver may not support (minor number,
// NUMA node, MIG mode, links) fall back to "unknown"/false; failing to read
// the UUID, name or memory is an error.
func Discover(lib nvml.Interface) ([]GPU, error) {
	n, ret := lib.DeviceGetCount()
	if ret != nvml.SUCCESS {
		return nil, fmt.Errorf("count GPUs: %w", ret)
	}
	gpus := make([]GPU, 0, n)
	devs := make([]nvml.Device, 0, n)
	for i := 0; i < n; i++ {
		dev, ret := lib.DeviceGetHandleByIndex(i)
		if ret != nvml.SUCCESS {
			return nil, fmt.Errorf("get GPU %d: %w", i, ret)
		}
		g, err := describe(dev, i)
		if err != nil {
			return nil, err
		}
		gpus = append(gpus, g)
		devs = append(devs, dev)
	}
	discoverLinks(devs, gpus)
	return gpus, nil
}

// describe reads one GPU.
func describe(dev nvml.Device, index int) (GPU, error) {
	g := GPU{Index: index, Minor: -1, NUMANode: -1}
	var ret nvml.Return
	if g.UUID, ret = dev.GetUUID(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("get UUID of GPU %d: %w", index, ret)
	}
	if g.Name, ret = dev.GetName(); ret != nvml.SUCCESS {
		return g, fmt.Errorf("get name of GPU %d (%s): %w", index, g.UUID, ret)
	}
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS {
		return g, fmt.Errorf("get memory of GPU %d (%s): %w", index, g.UUID, ret)
	}
	g.MemoryMiB = int64(mem.Total / (1 << 20))
	if minor, ret := dev.GetMinorNumber(); ret == nvml.SUCCESS {
		g.Minor = minor
	}
	g.NUMANode = numaNode(dev)
	current, _, ret := dev.GetMigMode()
	switch {
	case ret == nvml.SUCCESS:
		g.MIGCapable = true
		g.MIGEnabled = current == nvml.DEVICE_MIG_ENABLE
	case errors.Is(ret, nvml.ERROR_NOT_SUPPORTED):
	default:
		return g, fmt.Errorf("get MIG mode of GPU %d (%s): %w", index, g.UUID, ret)
	}
	return g, nil
}
