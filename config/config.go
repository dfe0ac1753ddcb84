package config

// Where the device configuration lives in the cluster.
const (
	// DefaultConfigMapName is the ConfigMap that holds the device
	// configuration, as upstream Volcano and volcano-vgpu-device-plugin name it.
	DefaultConfigMapName = "volcano-vgpu-device-config"
	// DefaultConfigMapNamespace is the namespace the ConfigMap is read from
	// unless the plugin arguments say otherwise.
	DefaultConfigMapNamespace = "kube-system"
	// ConfigKey is the ConfigMap data key that holds the YAML document.
	ConfigKey = "device-config.yaml"
)

// Config is the device configuration: the content of the device-config.yaml
// key of the ConfigMap. Parse and Default return it with every default filled
// in and validated; consumers read the fields directly and must treat the
// value as immutable (the Loader shares one *Config between all readers).
type Config struct {
	// NVIDIA configures the HAMi vGPU backend (resource names, split counts,
	// scaling, MIG geometries).
	NVIDIA NVIDIAConfig `json:"nvidia"`
	// VNPUs configures the Ascend virtual NPU backends: the chip catalogue and
	// its templates. The YAML accepts both the legacy list form and HAMi's
	// object form {hamiVnpuCore, configs}.
	VNPUs VNPUs `json:"vnpus"`
	// NodeConfigs are per-node overrides for the NVIDIA node agent. Upstream
	// keeps them in a separate ConfigMap (volcano-vgpu-node-config, key
	// config.json, top-level key "nodeconfig"); this document accepts the same
	// key and lowercase field names, so that JSON document also parses here.
	NodeConfigs []NodeConfig `json:"nodeconfig,omitempty"`

	// IgnoredSections names top-level sections of HAMi's device-config.yaml
	// for other vendors (cambricon, hygon, metax...) that were present in the
	// document. They are accepted so HAMi's chart document parses, and are
	// otherwise ignored. Sorted; nil when there were none.
	IgnoredSections []string `json:"-"`
}

// ignoredSections are the top-level keys of HAMi's device-config.yaml that
// describe vendors this project does not schedule. A document carrying them
// is still accepted; any other unknown top-level key is an error.
func ignoredSections() map[string]bool {
	return map[string]bool{
		"amd":       true,
		"awsneuron": true,
		"biren":     true,
		"cambricon": true,
		"enflame":   true,
		"hygon":     true,
		"iluvatar":  true,
		"iluvatars": true,
		"kunlun":    true,
		"metax":     true,
		"mthreads":  true,
		"vastai":    true,
	}
}

// DeepCopy returns an independent copy of c. The Loader hands out shared
// pointers; a caller that wants to modify a configuration copies it first.
func (c *Config) DeepCopy() *Config {
	if c == nil {
		return nil
	}
	out := *c
	out.NVIDIA = c.NVIDIA.deepCopy()
	out.VNPUs = c.VNPUs.deepCopy()
	if c.NodeConfigs != nil {
		out.NodeConfigs = make([]NodeConfig, len(c.NodeConfigs))
		for i := range c.NodeConfigs {
			out.NodeConfigs[i] = c.NodeConfigs[i].deepCopy()
		}
	}
	out.IgnoredSections = cloneSlice(c.IgnoredSections)
	return &out
}

// cloneSlice copies a slice of values, keeping nil as nil.
func cloneSlice[T any](in []T) []T {
	if in == nil {
		return nil
	}
	return append(make([]T, 0, len(in)), in...)
}

// clonePtr copies the value behind a pointer, keeping nil as nil.
func clonePtr[T any](in *T) *T {
	if in == nil {
		return nil
	}
	v := *in
	return &v
}
