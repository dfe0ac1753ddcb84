package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Ascend vNPU modes, as HAMi's hamiVnpuMode names them.
const (
	// VNPUModeTemplate slices chips by the templates of their entry.
	VNPUModeTemplate = "template"
	// VNPUModeHAMiCore shares chips by memory and AI-core limits (HAMi core).
	VNPUModeHAMiCore = "hami-core"
	// VNPUModeENPU is HAMi's ENPU mode.
	VNPUModeENPU = "enpu"
)

// VNPUs is the vnpus: section. Two YAML forms parse:
//
//	vnpus:              # legacy list form (Volcano, HAMi before v2.9)
//	- chipName: 910B3
//	  ...
//
//	vnpus:              # object form (HAMi v2.9 and later, Volcano master)
//	  hamiVnpuCore: false
//	  configs:
//	  - chipName: 910B3
//	    ...
//
// When the section is absent, or the object form has no configs key, Configs
// is the built-in chip catalogue. An explicitly empty list means no chips.
type VNPUs struct {
	// HAMiVNPUCore selects HAMi-core sharing instead of templates (the
	// deprecated boolean form of HAMiVNPUMode). Default false.
	HAMiVNPUCore bool `json:"hamiVnpuCore,omitempty"`
	// HAMiVNPUMode is template or hami-core (or hamiCore); empty means
	// hami-core when HAMiVNPUCore is set, else template. Use Mode(). HAMi's
	// enpu parses but is refused (unsupported.go): it is not implemented.
	HAMiVNPUMode string `json:"hamiVnpuMode,omitempty"`
	// ENPUPolicy is HAMi's ENPU policy. The ENPU mode is not implemented, so
	// a non-empty policy is refused (unsupported.go).
	ENPUPolicy string `json:"enpuPolicy,omitempty"`
	// OverwriteEnv hides the chips from containers that ask for none (HAMi).
	OverwriteEnv bool `json:"overwriteEnv,omitempty"`
	// RuntimeClassName is set on pods that ask for vNPUs (HAMi).
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
	// VNPUDeviceSplitCount is HAMi's split count for the Ascend device
	// plugin; 0 = the plugin's default.
	VNPUDeviceSplitCount int32 `json:"vnpuDeviceSplitCount,omitempty"`
	// Configs is the chip catalogue, one entry per chip type.
	Configs []VNPUConfig `json:"configs"`

	// ListForm records that the document used the legacy list form. It only
	// changes how error paths are spelled (vnpus[1] rather than
	// vnpus.configs[1]); it is never written out.
	ListForm bool `json:"-"`
}

// VNPUConfig describes one Ascend chip type and the templates it can be
// sliced into. Keys follow HAMi's VNPUConfig (pkg/device/ascend/vnpu.go).
type VNPUConfig struct {
	// ChipName is the chip name the node agent reports, like "910B3".
	ChipName string `json:"chipName"`
	// CommonWord names the device type in annotations and resources, like
	// "Ascend910B3" (hami.io/node-register-<CommonWord>).
	CommonWord string `json:"commonWord"`
	// ResourceName is the count resource. Default huawei.com/<CommonWord>.
	ResourceName string `json:"resourceName"`
	// ResourceMemoryName is the memory resource (MiB). Default
	// <ResourceName>-memory.
	ResourceMemoryName string `json:"resourceMemoryName"`
	// ResourceCoreName is the AI-core resource used in hami-core mode.
	// Default <ResourceName>-core.
	ResourceCoreName string `json:"resourceCoreName,omitempty"`
	// MemoryAllocatable is the memory in MiB that can be handed out
	// (1..MemoryCapacity). Default MemoryCapacity.
	MemoryAllocatable int64 `json:"memoryAllocatable"`
	// MemoryCapacity is the chip's memory in MiB. Required, > 0.
	MemoryCapacity int64 `json:"memoryCapacity"`
	// MemoryFactor is the unit of the memory resource, as for NVIDIA (HAMi).
	// Default 1.
	MemoryFactor int32 `json:"memoryFactor,omitempty"`
	// AICore is the chip's number of AI cores. Required, > 0.
	AICore int32 `json:"aiCore"`
	// AICPU is the chip's number of AI CPUs (0 when not sliced, as on 910A).
	AICPU int32 `json:"aiCPU"`
	// Templates are the virtual NPU shapes the chip can be sliced into.
	Templates []VNPUTemplate `json:"templates"`
	// SuperPod marks Atlas super-pod chips (HAMi's 910C entry), whose
	// requests HAMi's webhook rounds up to whole modules. Nothing here does,
	// so true is refused (unsupported.go).
	SuperPod bool `json:"superPod,omitempty"`
	// OverwriteEnv is the per-entry form of VNPUs.OverwriteEnv found in older
	// HAMi charts (HAMi compatibility).
	OverwriteEnv bool `json:"overwriteEnv,omitempty"`
	// RuntimeClassName is the per-entry form of VNPUs.RuntimeClassName found
	// in older HAMi charts (HAMi compatibility).
	RuntimeClassName string `json:"runtimeClassName,omitempty"`
}

// VNPUTemplate is one virtual NPU shape.
type VNPUTemplate struct {
	// Name identifies the template, like "vir02" or "vir05_1c_16g".
	Name string `json:"name"`
	// Memory is the template's memory in MiB (<= the chip's allocatable).
	Memory int64 `json:"memory"`
	// AICore is the template's AI cores (1..the chip's AI cores).
	AICore int32 `json:"aiCore,omitempty"`
	// AICPU is the template's AI CPUs (0..the chip's AI CPUs).
	AICPU int32 `json:"aiCPU,omitempty"`
}

// vnpusObject is the object form of the section, without VNPUs' methods.
type vnpusObject VNPUs

// UnmarshalJSON accepts the list form and the object form of the section.
// JSON null leaves v unchanged. Decoding is lenient here; Parse checks the
// document's shape strictly (unknown keys, types) before decoding.
func (v *VNPUs) UnmarshalJSON(data []byte) error {
	trimmed := bytes.TrimSpace(data)
	switch {
	case bytes.Equal(trimmed, []byte("null")):
		return nil
	case len(trimmed) > 0 && trimmed[0] == '[':
		var configs []VNPUConfig
		if err := json.Unmarshal(trimmed, &configs); err != nil {
			return fmt.Errorf("decode vnpus list: %w", err)
		}
		*v = VNPUs{Configs: configs, ListForm: true}
		return nil
	case len(trimmed) > 0 && trimmed[0] == '{':
		var out vnpusObject
		if err := json.Unmarshal(trimmed, &out); err != nil {
			return fmt.Errorf("decode vnpus object: %w", err)
		}
		*v = VNPUs(out)
		return nil
	default:
		return fmt.Errorf("decode vnpus: must be a list of chip entries or an object with configs, got %.40s", trimmed)
	}
}

// Mode resolves the vNPU mode: HAMiVNPUMode when set (hamiCore is read as
// hami-core), else hami-core when HAMiVNPUCore is set, else template.
// Validate rejects any other mode, and enpu (not implemented), so a
// validated Config returns VNPUModeTemplate or VNPUModeHAMiCore.
func (v VNPUs) Mode() string {
	switch mode := strings.ToLower(strings.TrimSpace(v.HAMiVNPUMode)); mode {
	case "":
		if v.HAMiVNPUCore {
			return VNPUModeHAMiCore
		}
		return VNPUModeTemplate
	case "hamicore":
		return VNPUModeHAMiCore
	default:
		return mode
	}
}

// Chip returns the entry whose CommonWord is commonWord.
func (v VNPUs) Chip(commonWord string) (VNPUConfig, bool) {
	for _, c := range v.Configs {
		if c.CommonWord == commonWord {
			return c, true
		}
	}
	return VNPUConfig{}, false
}

func (v VNPUs) deepCopy() VNPUs {
	out := v
	if v.Configs != nil {
		out.Configs = make([]VNPUConfig, len(v.Configs))
		for i, c := range v.Configs {
			c.Templates = cloneSlice(c.Templates)
			out.Configs[i] = c
		}
	}
	return out
}
