package config

import (
	"fmt"

	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Default resource names of the nvidia: section.
const (
	// DefaultResourceCountName is the default nvidia.resourceCountName.
	DefaultResourceCountName = vgpuproto.ResourceNumber
	// DefaultResourceMemoryName is the default nvidia.resourceMemoryName.
	DefaultResourceMemoryName = vgpuproto.ResourceMemory
	// DefaultResourceMemoryPercentageName is the default
	// nvidia.resourceMemoryPercentageName.
	DefaultResourceMemoryPercentageName = vgpuproto.ResourceMemoryPercentage
	// DefaultResourceCoreName is the default nvidia.resourceCoreName.
	DefaultResourceCoreName = vgpuproto.ResourceCores
	// DefaultResourcePriorityName is the default nvidia.resourcePriorityName.
	DefaultResourcePriorityName = vgpuproto.ResourcePriority
)

// Default numeric settings of the nvidia: section.
const (
	// DefaultGPUNum is the default nvidia.defaultGPUNum.
	DefaultGPUNum = 1
	// DefaultDeviceSplitCount is the default nvidia.deviceSplitCount.
	DefaultDeviceSplitCount = 10
	// DefaultDeviceMemoryScaling is the default nvidia.deviceMemoryScaling.
	DefaultDeviceMemoryScaling = 1.0
	// DefaultDeviceCoreScaling is the default nvidia.deviceCoreScaling.
	DefaultDeviceCoreScaling = 1.0
	// DefaultGPUMemoryFactor is the default nvidia.gpuMemoryFactor.
	DefaultGPUMemoryFactor = 1
)

// Default returns the complete configuration used when the ConfigMap is
// absent: the nvidia: defaults, the built-in MIG catalogue and the built-in
// Ascend chip catalogue. It returns a new value on every call.
func Default() *Config {
	c := decodeTarget()
	c.applyDefaults()
	return c
}

// decodeTarget is what a document is decoded into: the scalar defaults whose
// zero value is meaningful (so that an explicit 0 in the document can be told
// from an absent key and rejected), and nil lists (so that a list in the
// document replaces the default instead of merging into it).
func decodeTarget() *Config {
	return &Config{
		NVIDIA: NVIDIAConfig{
			DefaultGPUNum:       DefaultGPUNum,
			DeviceSplitCount:    DefaultDeviceSplitCount,
			DeviceMemoryScaling: DefaultDeviceMemoryScaling,
			DeviceCoreScaling:   DefaultDeviceCoreScaling,
		},
	}
}

// applyDefaults fills what the document left out. It never overrides a value
// the document set, except where upstream reads a zero as "unset".
func (c *Config) applyDefaults() {
	c.NVIDIA.applyDefaults()
	c.VNPUs.applyDefaults()
	for i := range c.NodeConfigs {
		c.NodeConfigs[i].applyDefaults()
	}
}

func (n *NVIDIAConfig) applyDefaults() {
	setIfEmpty(&n.ResourceCountName, DefaultResourceCountName)
	setIfEmpty(&n.ResourceMemoryName, DefaultResourceMemoryName)
	setIfEmpty(&n.ResourceMemoryPercentageName, DefaultResourceMemoryPercentageName)
	setIfEmpty(&n.ResourceCoreName, DefaultResourceCoreName)
	setIfEmpty(&n.ResourcePriorityName, DefaultResourcePriorityName)
	// Upstream treats a memory factor of 0 like 1; HAMi spells it memoryFactor.
	if n.GPUMemoryFactor == 0 && n.MemoryFactor > 0 {
		n.GPUMemoryFactor = n.MemoryFactor
	}
	if n.GPUMemoryFactor == 0 {
		n.GPUMemoryFactor = DefaultGPUMemoryFactor
	}
	if n.KnownMIGGeometries == nil {
		n.KnownMIGGeometries = defaultMIGGeometries()
	}
	for i := range n.KnownMIGGeometries {
		for j := range n.KnownMIGGeometries[i].Geometries {
			g := &n.KnownMIGGeometries[i].Geometries[j]
			setIfEmpty(&g.Group, fmt.Sprintf("group%d", j+1))
		}
	}
}

func (v *VNPUs) applyDefaults() {
	if v.Configs == nil {
		v.Configs = defaultVNPUConfigs()
	}
	for i := range v.Configs {
		e := &v.Configs[i]
		// Derive names only from a present commonWord, so a missing one is
		// reported as missing rather than as a malformed derived name.
		if e.CommonWord != "" {
			setIfEmpty(&e.ResourceName, ascendproto.ResourceDomain+e.CommonWord)
		}
		if e.ResourceName != "" {
			setIfEmpty(&e.ResourceMemoryName, e.ResourceName+"-memory")
			setIfEmpty(&e.ResourceCoreName, e.ResourceName+"-core")
		}
		if e.MemoryAllocatable == 0 {
			e.MemoryAllocatable = e.MemoryCapacity
		}
		if e.MemoryFactor == 0 {
			e.MemoryFactor = 1
		}
	}
}

func (o *NodeConfig) applyDefaults() {
	// Upstream's node config used plain numbers where 0 meant "no override".
	if o.DeviceSplitCount != nil && *o.DeviceSplitCount == 0 {
		o.DeviceSplitCount = nil
	}
	if o.DeviceMemoryScaling != nil && *o.DeviceMemoryScaling == 0 {
		o.DeviceMemoryScaling = nil
	}
	if o.DeviceCoreScaling != nil && *o.DeviceCoreScaling == 0 {
		o.DeviceCoreScaling = nil
	}
}

func setIfEmpty(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

// defaultMIGGeometries is the built-in MIG catalogue. A30 and A100 follow
// volcano-vgpu-device-plugin's shipped ConfigMap (memory in MiB as NVML
// reports the instances). H100 80GB uses the model names of HAMi's
// migProfileAllowlist with the same profile sizes as the A100 80GB; operators
// with exact figures for their cards override the catalogue.
func defaultMIGGeometries() []AllowedMIGGeometries {
	return []AllowedMIGGeometries{
		{
			Models: []string{"A30"},
			Geometries: []MIGGeometry{
				{Group: "group1", Instances: []MIGTemplate{{Name: "1g.6gb", Memory: 6144, Count: 4}}},
				{Group: "group2", Instances: []MIGTemplate{{Name: "2g.12gb", Memory: 12288, Count: 2}}},
				{Group: "group3", Instances: []MIGTemplate{{Name: "4g.24gb", Memory: 24576, Count: 1}}},
			},
		},
		{
			Models:     []string{"A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"},
			Geometries: sevenSliceGeometries("1g.5gb", 5120, "2g.10gb", 10240, "3g.20gb", 20480, "7g.40gb", 40960),
		},
		{
			Models:     []string{"A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"},
			Geometries: sevenSliceGeometries("1g.10gb", 9728, "2g.20gb", 19968, "3g.40gb", 40192, "7g.80gb", 80896),
		},
		{
			Models:     []string{"H100-PCIE-80GB", "H100-SXM5-80GB"},
			Geometries: sevenSliceGeometries("1g.10gb", 9728, "2g.20gb", 19968, "3g.40gb", 40192, "7g.80gb", 80896),
		},
	}
}

// sevenSliceGeometries is the four-layout catalogue upstream ships for the
// seven-slice cards: 7 x 1g, 3 x 2g + 1 x 1g, 2 x 3g, 1 x 7g.
func sevenSliceGeometries(g1 string, m1 int32, g2 string, m2 int32, g3 string, m3 int32, g7 string, m7 int32) []MIGGeometry {
	return []MIGGeometry{
		{Group: "group1", Instances: []MIGTemplate{{Name: g1, Memory: m1, Count: 7}}},
		{Group: "group2", Instances: []MIGTemplate{{Name: g2, Memory: m2, Count: 3}, {Name: g1, Memory: m1, Count: 1}}},
		{Group: "group3", Instances: []MIGTemplate{{Name: g3, Memory: m3, Count: 2}}},
		{Group: "group4", Instances: []MIGTemplate{{Name: g7, Memory: m7, Count: 1}}},
	}
}

// defaultVNPUConfigs is the built-in Ascend chip catalogue, the chips HAMi's
// chart ships (910C, a super-pod chip, is left to explicit configuration).
func defaultVNPUConfigs() []VNPUConfig {
	b3Templates := []VNPUTemplate{
		{Name: "vir05_1c_16g", Memory: 16384, AICore: 5, AICPU: 1},
		{Name: "vir10_3c_32g", Memory: 32768, AICore: 10, AICPU: 3},
	}
	return []VNPUConfig{
		ascendChip("910A", "Ascend910A", 32768, 32768, 30, 0, []VNPUTemplate{
			{Name: "vir02", Memory: 2184, AICore: 2},
			{Name: "vir04", Memory: 4369, AICore: 4},
			{Name: "vir08", Memory: 8738, AICore: 8},
			{Name: "vir16", Memory: 17476, AICore: 16},
		}),
		ascendChip("910B2", "Ascend910B2", 65536, 65536, 24, 6, []VNPUTemplate{
			{Name: "vir03_1c_8g", Memory: 8192, AICore: 3, AICPU: 1},
			{Name: "vir06_1c_16g", Memory: 16384, AICore: 6, AICPU: 1},
			{Name: "vir12_3c_32g", Memory: 32768, AICore: 12, AICPU: 3},
		}),
		ascendChip("910B3", "Ascend910B3", 65536, 65536, 20, 7, b3Templates),
		ascendChip("910B4-1", "Ascend910B4-1", 65536, 65536, 20, 7, cloneSlice(b3Templates)),
		ascendChip("910B4", "Ascend910B4", 32768, 32768, 20, 7, []VNPUTemplate{
			{Name: "vir05_1c_8g", Memory: 8192, AICore: 5, AICPU: 1},
			{Name: "vir10_3c_16g", Memory: 16384, AICore: 10, AICPU: 3},
		}),
		ascendChip("310P3", "Ascend310P", 21527, 24576, 8, 7, []VNPUTemplate{
			{Name: "vir01", Memory: 3072, AICore: 1, AICPU: 1},
			{Name: "vir02", Memory: 6144, AICore: 2, AICPU: 2},
			{Name: "vir04", Memory: 12288, AICore: 4, AICPU: 4},
		}),
	}
}

func ascendChip(chip, commonWord string, allocatable, capacity int64, aiCore, aiCPU int32, templates []VNPUTemplate) VNPUConfig {
	resource := ascendproto.ResourceDomain + commonWord
	return VNPUConfig{
		ChipName:           chip,
		CommonWord:         commonWord,
		ResourceName:       resource,
		ResourceMemoryName: resource + "-memory",
		ResourceCoreName:   resource + "-core",
		MemoryAllocatable:  allocatable,
		MemoryCapacity:     capacity,
		MemoryFactor:       1,
		AICore:             aiCore,
		AICPU:              aiCPU,
		Templates:          templates,
	}
}
