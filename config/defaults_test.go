package config

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestDefaultIsValid(t *testing.T) {
	if err := Default().Validate(); err != nil {
		t.Fatalf("Default().Validate() = %v, want nil", err)
	}
}

func TestDefaultValues(t *testing.T) {
	c := Default()
	n := c.NVIDIA
	tests := []struct {
		name string
		got  any
		want any
	}{
		{name: "resourceCountName", got: n.ResourceCountName, want: "volcano.sh/vgpu-number"},
		{name: "resourceMemoryName", got: n.ResourceMemoryName, want: "volcano.sh/vgpu-memory"},
		{name: "resourceMemoryPercentageName", got: n.ResourceMemoryPercentageName, want: "volcano.sh/vgpu-memory-percentage"},
		{name: "resourceCoreName", got: n.ResourceCoreName, want: "volcano.sh/vgpu-cores"},
		{name: "resourcePriorityName", got: n.ResourcePriorityName, want: "volcano.sh/vgpu-priority"},
		{name: "defaultMemory", got: n.DefaultMemory, want: int32(0)},
		{name: "defaultCores", got: n.DefaultCores, want: int32(0)},
		{name: "defaultGPUNum", got: n.DefaultGPUNum, want: int32(1)},
		{name: "deviceSplitCount", got: n.DeviceSplitCount, want: int32(10)},
		{name: "deviceMemoryScaling", got: n.DeviceMemoryScaling, want: 1.0},
		{name: "deviceCoreScaling", got: n.DeviceCoreScaling, want: 1.0},
		{name: "gpuMemoryFactor", got: n.GPUMemoryFactor, want: int32(1)},
		{name: "MIG models", got: migModels(n.KnownMIGGeometries), want: [][]string{
			{"A30"},
			{"A100-SXM4-40GB", "A100-40GB-PCIe", "A100-PCIE-40GB"},
			{"A100-SXM4-80GB", "A100-80GB-PCIe", "A100-PCIE-80GB"},
			{"H100-PCIE-80GB", "H100-SXM5-80GB"},
		}},
		{name: "vNPU mode", got: c.VNPUs.Mode(), want: VNPUModeTemplate},
		{name: "vNPU chips", got: commonWords(c.VNPUs.Configs), want: []string{
			"Ascend910A", "Ascend910B2", "Ascend910B3", "Ascend910B4-1", "Ascend910B4", "Ascend310P",
		}},
		{name: "node overrides", got: len(c.NodeConfigs), want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, tc.got); diff != "" {
				t.Errorf("Default() %s mismatch (-want +got):\n%s", tc.name, diff)
			}
		})
	}
}

func migModels(list []AllowedMIGGeometries) [][]string {
	var out [][]string
	for _, m := range list {
		out = append(out, m.Models)
	}
	return out
}

func commonWords(list []VNPUConfig) []string {
	var out []string
	for _, c := range list {
		out = append(out, c.CommonWord)
	}
	return out
}

// TestAbsentFieldsGetDefaults checks that a document setting one field
// leaves every other field at its default, section by section.
func TestAbsentFieldsGetDefaults(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want func(c *Config)
	}{
		{
			name: "one nvidia field",
			doc:  "nvidia:\n  defaultCores: 30\n",
			want: func(c *Config) { c.NVIDIA.DefaultCores = 30 },
		},
		{
			name: "explicit zero where zero is allowed",
			doc:  "nvidia:\n  defaultGPUNum: 0\n",
			want: func(c *Config) { c.NVIDIA.DefaultGPUNum = 0 },
		},
		{
			name: "HAMi memoryFactor alone sets gpuMemoryFactor",
			doc:  "nvidia:\n  memoryFactor: 4\n",
			want: func(c *Config) { c.NVIDIA.MemoryFactor, c.NVIDIA.GPUMemoryFactor = 4, 4 },
		},
		{
			name: "gpuMemoryFactor 0 reads as 1, as upstream",
			doc:  "nvidia:\n  gpuMemoryFactor: 0\n",
			want: func(*Config) {},
		},
		{
			name: "empty resource name reads as the default",
			doc:  "nvidia:\n  resourcePriorityName: \"\"\n",
			want: func(*Config) {},
		},
		{
			name: "vnpus object without configs keeps the catalogue",
			doc:  "vnpus:\n  hamiVnpuCore: true\n",
			want: func(c *Config) { c.VNPUs.HAMiVNPUCore = true },
		},
		{
			name: "vnpu entry defaults: names, allocatable, memory factor",
			doc:  "vnpus:\n- {chipName: X1, commonWord: AscendX1, memoryCapacity: 1024, aiCore: 4, templates: [{name: t, memory: 512, aiCore: 2}]}\n",
			want: func(c *Config) {
				c.VNPUs = VNPUs{ListForm: true, Configs: []VNPUConfig{
					ascendChip("X1", "AscendX1", 1024, 1024, 4, 0, []VNPUTemplate{{Name: "t", Memory: 512, AICore: 2}}),
				}}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse([]byte(tc.doc))
			if err != nil {
				t.Fatalf("Parse() error: %v", err)
			}
			want := Default()
			tc.want(want)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSampleIsDefault keeps samples/device-config.yaml, which goes into the
// docs and the Helm chart, equal to what an absent ConfigMap means.
func TestSampleIsDefault(t *testing.T) {
	data, err := os.ReadFile("samples/device-config.yaml")
	if err != nil {
		t.Fatalf("read sample: %v", err)
	}
	got, err := Parse(data)
	if err != nil {
		t.Fatalf("Parse(sample) error: %v", err)
	}
	if diff := cmp.Diff(Default(), got); diff != "" {
		t.Errorf("sample differs from Default() (-want +got):\n%s", diff)
	}
}

func TestDefaultReturnsIndependentValues(t *testing.T) {
	a, b := Default(), Default()
	a.NVIDIA.KnownMIGGeometries[0].Geometries[0].Instances[0].Count = 99
	a.VNPUs.Configs[2].Templates[0].Memory = 1
	a.VNPUs.Configs[3].Templates[0].Memory = 2
	if diff := cmp.Diff(Default(), b); diff != "" {
		t.Errorf("editing one Default() changed another (-want +got):\n%s", diff)
	}
	if c := Default(); c.VNPUs.Configs[3].Templates[0].Memory != 16384 {
		t.Errorf("910B3 and 910B4-1 share their template list")
	}
}

func TestDeepCopy(t *testing.T) {
	orig, err := Parse(readTestdata(t, "nodeconfig.yaml"))
	if err != nil {
		t.Fatalf("Parse() error: %v", err)
	}
	orig.NVIDIA.MIGProfileAllowlist = []MIGProfileAllowlist{{Models: []string{"A30"}, Profiles: []string{"1g.6gb"}}}
	orig.IgnoredSections = []string{"amd"}
	cp := orig.DeepCopy()
	if diff := cmp.Diff(orig, cp); diff != "" {
		t.Fatalf("DeepCopy() mismatch (-want +got):\n%s", diff)
	}
	snapshot := orig.DeepCopy()
	cp.NVIDIA.KnownMIGGeometries[0].Models[0] = "changed"
	cp.NVIDIA.KnownMIGGeometries[0].Geometries[0].Instances[0].Memory = 1
	cp.NVIDIA.MIGProfileAllowlist[0].Profiles[0] = "changed"
	cp.VNPUs.Configs[0].Templates[0].Name = "changed"
	*cp.NodeConfigs[0].DeviceSplitCount = 99
	cp.NodeConfigs[0].FilterDevices.UUID[0] = "changed"
	cp.IgnoredSections[0] = "changed"
	if diff := cmp.Diff(snapshot, orig); diff != "" {
		t.Errorf("editing the copy changed the original (-want +got):\n%s", diff)
	}
	if (*Config)(nil).DeepCopy() != nil {
		t.Errorf("nil.DeepCopy() != nil")
	}
}
