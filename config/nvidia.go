package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// NVIDIAConfig is the nvidia: section. Field names and YAML keys follow
// Volcano's NvidiaConfig (pkg/scheduler/api/devices/config) and HAMi's
// (pkg/device/nvidia); the fields marked "HAMi compatibility" are accepted
// so HAMi's chart document parses, and are carried for the node agent.
type NVIDIAConfig struct {
	// ResourceCountName is the extended resource that asks for a number of
	// vGPUs. Default volcano.sh/vgpu-number.
	ResourceCountName string `json:"resourceCountName"`
	// ResourceMemoryName asks for device memory in MiB per vGPU.
	// Default volcano.sh/vgpu-memory.
	ResourceMemoryName string `json:"resourceMemoryName"`
	// ResourceMemoryPercentageName asks for device memory as a percentage of
	// the card. Default volcano.sh/vgpu-memory-percentage.
	ResourceMemoryPercentageName string `json:"resourceMemoryPercentageName"`
	// ResourceCoreName asks for a percentage of the card's SMs.
	// Default volcano.sh/vgpu-cores.
	ResourceCoreName string `json:"resourceCoreName"`
	// ResourcePriorityName asks for a task priority passed to libvgpu.
	// Default volcano.sh/vgpu-priority.
	ResourcePriorityName string `json:"resourcePriorityName"`
	// OverwriteEnv sets NVIDIA_VISIBLE_DEVICES=none on containers that ask
	// for no vGPU, so they cannot see the node's cards. Default false.
	OverwriteEnv bool `json:"overwriteEnv"`
	// DefaultMemory is the device memory in MiB given to a vGPU request that
	// names neither memory nor memory percentage; 0 means the whole card.
	DefaultMemory int32 `json:"defaultMemory"`
	// DefaultCores is the SM percentage (0..100) given to a request that names
	// no cores; 0 means no reservation.
	DefaultCores int32 `json:"defaultCores"`
	// DefaultGPUNum is the number of vGPUs added to a container that asks for
	// memory or cores but not for a count; 0 turns that off. Default 1.
	DefaultGPUNum int32 `json:"defaultGPUNum"`
	// DeviceSplitCount is how many tasks may share one card (1..1000).
	// Default 10.
	DeviceSplitCount int32 `json:"deviceSplitCount"`
	// DeviceMemoryScaling multiplies a card's memory as advertised (>1
	// oversubscribes, experimental upstream). Must be > 0. Default 1.
	DeviceMemoryScaling float64 `json:"deviceMemoryScaling"`
	// DeviceCoreScaling multiplies a card's cores as advertised. Must be > 0.
	// Default 1.
	DeviceCoreScaling float64 `json:"deviceCoreScaling"`
	// DisableCoreLimit turns off libvgpu's SM limiting. Default false.
	DisableCoreLimit bool `json:"disableCoreLimit"`
	// GPUMemoryFactor is the unit of the memory resource: a request of n
	// means n*GPUMemoryFactor MiB. Must be >= 1; 0 or absent means 1.
	GPUMemoryFactor int32 `json:"gpuMemoryFactor"`
	// KnownMIGGeometries is the catalogue of MIG layouts per GPU model, used
	// by the MIG operating mode. Absent means the built-in catalogue (A30,
	// A100 40GB, A100 80GB, H100 80GB); an empty list means none.
	KnownMIGGeometries []AllowedMIGGeometries `json:"knownMigGeometries"`

	// MemoryFactor is HAMi's name for GPUMemoryFactor (HAMi compatibility).
	// When both are set they must agree; consumers read GPUMemoryFactor.
	MemoryFactor int32 `json:"memoryFactor,omitempty"`
	// PreConfiguredDeviceMemory is HAMi's per-card memory override in MiB
	// for devices whose memory NVML cannot read (HAMi compatibility). 0 = off.
	PreConfiguredDeviceMemory int64 `json:"preConfiguredDeviceMemory,omitempty"`
	// EnableNUMATopology makes the node agent advertise each card's NUMA
	// node (HAMi compatibility). Default false.
	EnableNUMATopology bool `json:"enableNumaTopology,omitempty"`
	// GPUCorePolicy is HAMi's CUDA_DEVICE_CORE_LIMIT_SWITCH policy:
	// "default", "force" or "disable" (HAMi compatibility). Empty = default.
	GPUCorePolicy string `json:"gpuCorePolicy,omitempty"`
	// LibCudaLogLevel is libvgpu's LIBCUDA_LOG_LEVEL, 0..4 (HAMi
	// compatibility). Empty = libvgpu's own default.
	LibCudaLogLevel LogLevel `json:"libCudaLogLevel,omitempty"`
	// RuntimeClassName is set on pods that ask for vGPUs when they name none
	// (HAMi compatibility). Empty = leave pods alone.
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// MIGProfileAllowlist is HAMi's dynamic-MIG policy: the profile names
	// allowed per model. Not implemented (placement uses KnownMIGGeometries),
	// so a non-empty list is refused (unsupported.go).
	MIGProfileAllowlist []MIGProfileAllowlist `json:"migProfileAllowlist,omitempty"`
}

// AllowedMIGGeometries lists the MIG layouts one family of GPU models can be
// partitioned into.
type AllowedMIGGeometries struct {
	// Models are GPU model names as NVML reports them (for example
	// "A100-SXM4-40GB"). Upstream matches a card when its type contains one of
	// them as a substring.
	Models []string `json:"models"`
	// Geometries are the alternative layouts, in order of preference.
	Geometries []MIGGeometry `json:"allowedGeometries"`
}

// MIGGeometry is one layout of a card: a named group of MIG instances that
// coexist. The YAML accepts volcano-vgpu-device-plugin's object form
// {group, geometries: [...]} and the older bare-list form [...] (HAMi and
// early Volcano), in which case the group is named "group<N>" by position.
type MIGGeometry struct {
	// Group names the layout; unique within its models entry.
	Group string `json:"group"`
	// Instances are the MIG profiles of the layout and how many of each.
	Instances []MIGTemplate `json:"geometries"`
}

// MIGTemplate is one MIG profile inside a layout.
type MIGTemplate struct {
	// Name is the MIG profile, like "1g.5gb" or "3g.40gb".
	Name string `json:"name"`
	// Memory is the usable memory of one instance in MiB.
	Memory int32 `json:"memory"`
	// Count is how many instances of this profile the layout has (1..7).
	Count int32 `json:"count"`
	// Core is the instance's share of the card's SMs in percent, when known
	// (newer HAMi). 0 = not given.
	Core int32 `json:"core,omitempty"`
}

// MIGProfileAllowlist is one entry of HAMi's migProfileAllowlist.
type MIGProfileAllowlist struct {
	// Models are GPU model names, as in AllowedMIGGeometries.
	Models []string `json:"models"`
	// Profiles are the MIG profile names allowed on those models.
	Profiles []string `json:"profiles"`
}

// UnmarshalJSON accepts both forms of a geometry: the object form
// {group, geometries} and the bare list of templates. Decoding is lenient
// here; Parse checks the document's shape strictly before decoding.
func (g *MIGGeometry) UnmarshalJSON(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) > 0 && trimmed[0] == '[' {
		var instances []MIGTemplate
		if err := json.Unmarshal(trimmed, &instances); err != nil {
			return fmt.Errorf("decode MIG geometry list: %w", err)
		}
		*g = MIGGeometry{Instances: instances}
		return nil
	}
	var out migGeometryObject
	if err := json.Unmarshal(trimmed, &out); err != nil {
		return fmt.Errorf("decode MIG geometry: %w", err)
	}
	*g = MIGGeometry(out)
	return nil
}

// migGeometryObject is the object form of a geometry, without MIGGeometry's
// methods.
type migGeometryObject MIGGeometry

// LogLevel is a libvgpu log level. YAML may write it as a number (1) or a
// string ("1"); it is kept as the string HAMi uses.
type LogLevel string

// UnmarshalJSON accepts a JSON number or string.
func (l *LogLevel) UnmarshalJSON(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	if bytes.Equal(trimmed, []byte("null")) {
		return nil
	}
	if len(trimmed) > 0 && trimmed[0] == '"' {
		var s string
		if err := json.Unmarshal(trimmed, &s); err != nil {
			return fmt.Errorf("decode log level: %w", err)
		}
		*l = LogLevel(s)
		return nil
	}
	var n json.Number
	if err := json.Unmarshal(trimmed, &n); err != nil {
		return fmt.Errorf("decode log level: %w", err)
	}
	*l = LogLevel(n.String())
	return nil
}

// valid reports whether the level is empty (unset) or one of 0..4.
func (l LogLevel) valid() bool {
	if l == "" {
		return true
	}
	n, err := strconv.Atoi(string(l))
	return err == nil && n >= 0 && n <= 4
}

func (n NVIDIAConfig) deepCopy() NVIDIAConfig {
	out := n
	if n.KnownMIGGeometries != nil {
		out.KnownMIGGeometries = make([]AllowedMIGGeometries, len(n.KnownMIGGeometries))
		for i, m := range n.KnownMIGGeometries {
			cp := AllowedMIGGeometries{Models: cloneSlice(m.Models)}
			if m.Geometries != nil {
				cp.Geometries = make([]MIGGeometry, len(m.Geometries))
				for j, g := range m.Geometries {
					cp.Geometries[j] = MIGGeometry{Group: g.Group, Instances: cloneSlice(g.Instances)}
				}
			}
			out.KnownMIGGeometries[i] = cp
		}
	}
	if n.MIGProfileAllowlist != nil {
		out.MIGProfileAllowlist = make([]MIGProfileAllowlist, len(n.MIGProfileAllowlist))
		for i, a := range n.MIGProfileAllowlist {
			out.MIGProfileAllowlist[i] = MIGProfileAllowlist{Models: cloneSlice(a.Models), Profiles: cloneSlice(a.Profiles)}
		}
	}
	return out
}
