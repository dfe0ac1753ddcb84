package config

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestForNode(t *testing.T) {
	c, err := Parse(readTestdata(t, "nodeconfig.yaml"))
	if err != nil {
		t.Fatalf("Parse() error: %v", err)
	}
	inherited := NodeSettings{
		OperatingMode:       OperatingModeHAMiCore,
		DeviceSplitCount:    8,
		DeviceMemoryScaling: 1,
		DeviceCoreScaling:   1,
	}
	tests := []struct {
		name string
		node string
		want NodeSettings
	}{
		{
			name: "node without override inherits the nvidia section",
			node: "cpu-node",
			want: inherited,
		},
		{
			name: "override replaces what it sets",
			node: "gpu-node-1",
			want: NodeSettings{
				OperatingMode:       OperatingModeHAMiCore,
				DeviceSplitCount:    4,
				DeviceMemoryScaling: 1.5,
				DeviceCoreScaling:   1,
				FilterDevices:       FilterDevices{UUID: []string{"GPU-0f6a1f0c-7d2b-4b44-9f43-6f1b7c2e9a10"}, Index: []int32{3}},
			},
		},
		{
			name: "MIG node",
			node: "gpu-node-2",
			want: NodeSettings{
				OperatingMode:       OperatingModeMIG,
				DeviceSplitCount:    8,
				DeviceMemoryScaling: 1,
				DeviceCoreScaling:   2,
			},
		},
		{
			name: "zeros in an override inherit",
			node: "gpu-node-3",
			want: inherited,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, c.ForNode(tc.node)); diff != "" {
				t.Errorf("ForNode(%q) mismatch (-want +got):\n%s", tc.node, diff)
			}
		})
	}
}

func TestVNPUMode(t *testing.T) {
	tests := []struct {
		name string
		v    VNPUs
		want string
	}{
		{name: "default", v: VNPUs{}, want: VNPUModeTemplate},
		{name: "deprecated boolean", v: VNPUs{HAMiVNPUCore: true}, want: VNPUModeHAMiCore},
		{name: "mode wins over boolean", v: VNPUs{HAMiVNPUCore: true, HAMiVNPUMode: "template"}, want: VNPUModeTemplate},
		{name: "HAMi's camel spelling", v: VNPUs{HAMiVNPUMode: "hamiCore"}, want: VNPUModeHAMiCore},
		{name: "enpu", v: VNPUs{HAMiVNPUMode: " ENPU "}, want: VNPUModeENPU},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.v.Mode(); got != tc.want {
				t.Errorf("Mode() = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestVNPUsChip(t *testing.T) {
	v := Default().VNPUs
	got, ok := v.Chip("Ascend310P")
	if !ok || got.ChipName != "310P3" {
		t.Errorf("Chip(Ascend310P) = %q, %v; want 310P3, true", got.ChipName, ok)
	}
	if _, ok := v.Chip("Ascend999"); ok {
		t.Errorf("Chip(Ascend999) found an entry")
	}
}

func TestChangedPaths(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *Config)
		want []string
	}{
		{name: "no change", edit: func(*Config) {}},
		{
			name: "scalars",
			edit: func(c *Config) { c.NVIDIA.DeviceSplitCount, c.VNPUs.HAMiVNPUCore = 3, true },
			want: []string{"nvidia.deviceSplitCount", "vnpus.hamiVnpuCore"},
		},
		{
			name: "inside a list",
			edit: func(c *Config) { c.VNPUs.Configs[5].Templates[1].Memory = 1 },
			want: []string{"vnpus.configs[5].templates[1].memory"},
		},
		{
			name: "list length",
			edit: func(c *Config) { c.VNPUs.Configs = c.VNPUs.Configs[:1] },
			want: []string{"vnpus.configs"},
		},
		{
			name: "pointer set",
			edit: func(c *Config) { c.NodeConfigs = []NodeConfig{{Name: "n"}} },
			want: []string{"nodeconfig"},
		},
		{
			name: "an empty list equals an absent one",
			edit: func(c *Config) { c.NodeConfigs = []NodeConfig{} },
		},
		{
			name: "fields not in the document are not reported",
			edit: func(c *Config) { c.IgnoredSections, c.VNPUs.ListForm = []string{"amd"}, true },
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := Default()
			tc.edit(b)
			if diff := cmp.Diff(tc.want, ChangedPaths(Default(), b)); diff != "" {
				t.Errorf("ChangedPaths() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestChangedPathsIsBounded(t *testing.T) {
	b := Default()
	for i := range b.VNPUs.Configs {
		b.VNPUs.Configs[i].ChipName += "x"
		b.VNPUs.Configs[i].AICore++
		b.VNPUs.Configs[i].AICPU++
		b.VNPUs.Configs[i].MemoryCapacity++
	}
	got := ChangedPaths(Default(), b)
	if len(got) != maxChangedPaths+1 || got[len(got)-1] != "..." {
		t.Errorf("ChangedPaths() = %d entries ending %q, want %d ending \"...\"", len(got), got[len(got)-1], maxChangedPaths+1)
	}
}
