package config

// NVIDIA operating modes of a node.
const (
	// OperatingModeHAMiCore shares cards through libvgpu (the default).
	OperatingModeHAMiCore = "hami-core"
	// OperatingModeMIG hands out MIG instances.
	OperatingModeMIG = "mig"
	// OperatingModeMPS shares cards through CUDA MPS (HAMi).
	OperatingModeMPS = "mps"
)

// MIG strategies of the NVIDIA node agent.
const (
	// MIGStrategyNone exposes no MIG devices as resources of their own: the
	// only strategy the agent implements.
	MIGStrategyNone = "none"
	// MIGStrategySingle (NVIDIA's device plugin: MIG devices under the card's
	// resource) is refused.
	MIGStrategySingle = "single"
	// MIGStrategyMixed (NVIDIA's device plugin: one resource per MIG
	// profile) is refused.
	MIGStrategyMixed = "mixed"
)

// NodeConfig overrides NVIDIA settings on one node. Keys are lowercase, as in
// upstream's volcano-vgpu-node-config document. A nil pointer, an empty string
// and (as upstream reads them) a zero count or scaling all mean "inherit from
// the nvidia: section".
type NodeConfig struct {
	// Name is the node name. Required, unique.
	Name string `json:"name"`
	// OperatingMode is hami-core, mig or mps. Empty = hami-core.
	OperatingMode string `json:"operatingmode,omitempty"`
	// DeviceMemoryScaling overrides nvidia.deviceMemoryScaling.
	DeviceMemoryScaling *float64 `json:"devicememoryscaling,omitempty"`
	// DeviceCoreScaling overrides nvidia.deviceCoreScaling.
	DeviceCoreScaling *float64 `json:"devicecorescaling,omitempty"`
	// DeviceSplitCount overrides nvidia.deviceSplitCount.
	DeviceSplitCount *int32 `json:"devicesplitcount,omitempty"`
	// MIGStrategy is how MIG devices are exposed: only none (or empty) is
	// accepted, as the agent exposes no MIG devices of its own (with
	// operatingmode mig it creates the instances the scheduler places);
	// single and mixed are refused (unsupported.go).
	MIGStrategy string `json:"migstrategy,omitempty"`
	// FilterDevices lists cards the node agent must not register.
	FilterDevices *FilterDevices `json:"filterdevices,omitempty"`
	// PreConfiguredDeviceMemory overrides nvidia.preConfiguredDeviceMemory.
	PreConfiguredDeviceMemory *int64 `json:"preconfigureddevicememory,omitempty"`
	// LibCudaLogLevel overrides nvidia.libCudaLogLevel.
	LibCudaLogLevel *LogLevel `json:"libcudaloglevel,omitempty"`
	// EnableNUMATopology overrides nvidia.enableNumaTopology.
	EnableNUMATopology *bool `json:"enablenumatopology,omitempty"`
	// EnableGetPreferredAllocation is HAMi's switch for its device plugin's
	// GetPreferredAllocation. This agent always answers it, so only true (or
	// leaving it out) is accepted; false is refused (unsupported.go).
	EnableGetPreferredAllocation *bool `json:"enablegetpreferredallocation,omitempty"`
}

// FilterDevices lists cards to hide; a card listed by UUID or by index is
// not registered.
type FilterDevices struct {
	// UUID lists card UUIDs.
	UUID []string `json:"uuid"`
	// Index lists card indexes as NVML numbers them.
	Index []int32 `json:"index"`
}

// NodeSettings are the effective NVIDIA node-agent settings of one node: the
// nvidia: section with the node's override applied.
type NodeSettings struct {
	// OperatingMode is hami-core, mig or mps.
	OperatingMode string
	// DeviceSplitCount is how many tasks may share one card.
	DeviceSplitCount int32
	// DeviceMemoryScaling multiplies each card's memory.
	DeviceMemoryScaling float64
	// DeviceCoreScaling multiplies each card's cores.
	DeviceCoreScaling float64
	// FilterDevices are the cards not to register.
	FilterDevices FilterDevices
	// PreConfiguredDeviceMemory is the per-card memory override in MiB, 0 = off.
	PreConfiguredDeviceMemory int64
	// LibCudaLogLevel is libvgpu's log level, empty = libvgpu's default.
	LibCudaLogLevel LogLevel
	// EnableNUMATopology advertises each card's NUMA node.
	EnableNUMATopology bool
}

// ForNode returns the effective settings of the named node. A node without
// an override gets the nvidia: section's values.
func (c *Config) ForNode(name string) NodeSettings {
	n := c.NVIDIA
	s := NodeSettings{
		OperatingMode:             OperatingModeHAMiCore,
		DeviceSplitCount:          n.DeviceSplitCount,
		DeviceMemoryScaling:       n.DeviceMemoryScaling,
		DeviceCoreScaling:         n.DeviceCoreScaling,
		PreConfiguredDeviceMemory: n.PreConfiguredDeviceMemory,
		LibCudaLogLevel:           n.LibCudaLogLevel,
		EnableNUMATopology:        n.EnableNUMATopology,
	}
	for _, o := range c.NodeConfigs {
		if o.Name != name {
			continue
		}
		if o.OperatingMode != "" {
			s.OperatingMode = o.OperatingMode
		}
		s.DeviceSplitCount = valueOr(o.DeviceSplitCount, s.DeviceSplitCount)
		s.DeviceMemoryScaling = valueOr(o.DeviceMemoryScaling, s.DeviceMemoryScaling)
		s.DeviceCoreScaling = valueOr(o.DeviceCoreScaling, s.DeviceCoreScaling)
		s.PreConfiguredDeviceMemory = valueOr(o.PreConfiguredDeviceMemory, s.PreConfiguredDeviceMemory)
		s.LibCudaLogLevel = valueOr(o.LibCudaLogLevel, s.LibCudaLogLevel)
		s.EnableNUMATopology = valueOr(o.EnableNUMATopology, s.EnableNUMATopology)
		if o.FilterDevices != nil {
			s.FilterDevices = FilterDevices{
				UUID:  cloneSlice(o.FilterDevices.UUID),
				Index: cloneSlice(o.FilterDevices.Index),
			}
		}
		break
	}
	return s
}

// valueOr returns *p, or def when p is nil.
func valueOr[T any](p *T, def T) T {
	if p == nil {
		return def
	}
	return *p
}

func (o NodeConfig) deepCopy() NodeConfig {
	out := o
	out.DeviceMemoryScaling = clonePtr(o.DeviceMemoryScaling)
	out.DeviceCoreScaling = clonePtr(o.DeviceCoreScaling)
	out.DeviceSplitCount = clonePtr(o.DeviceSplitCount)
	out.PreConfiguredDeviceMemory = clonePtr(o.PreConfiguredDeviceMemory)
	out.LibCudaLogLevel = clonePtr(o.LibCudaLogLevel)
	out.EnableNUMATopology = clonePtr(o.EnableNUMATopology)
	out.EnableGetPreferredAllocation = clonePtr(o.EnableGetPreferredAllocation)
	if o.FilterDevices != nil {
		out.FilterDevices = &FilterDevices{
			UUID:  cloneSlice(o.FilterDevices.UUID),
			Index: cloneSlice(o.FilterDevices.Index),
		}
	}
	return out
}
