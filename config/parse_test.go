package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func readTestdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatalf("read testdata: %v", err)
	}
	return data
}

func ptr[T any](v T) *T { return &v }

// upstreamMIGCatalogue is knownMigGeometries as volcano-vgpu-device-plugin
// ships it (no H100 entry; one model repeated inside the A100 40GB entry).
func upstreamMIGCatalogue() []AllowedMIGGeometries {
	d := defaultMIGGeometries()[:3]
	d[1].Models = append(d[1].Models, "A100-SXM4-40GB")
	return d
}

func TestParseGoodDocuments(t *testing.T) {
	tests := []struct {
		name string
		file string
		// want edits Default() into the expected result.
		want func(c *Config)
	}{
		{
			name: "volcano-vgpu-device-plugin default document",
			file: "volcano-vgpu-device-plugin.yaml",
			want: func(c *Config) { c.NVIDIA.KnownMIGGeometries = upstreamMIGCatalogue() },
		},
		{
			name: "minimal document",
			file: "minimal.yaml",
			want: func(c *Config) { c.NVIDIA.DeviceSplitCount = 4 },
		},
		{
			name: "vnpus list form, names derived from commonWord",
			file: "vnpus-list.yaml",
			want: func(c *Config) {
				c.VNPUs = VNPUs{ListForm: true, Configs: []VNPUConfig{
					ascendChip("310P3", "Ascend310P", 21527, 24576, 8, 7, []VNPUTemplate{
						{Name: "vir01", Memory: 3072, AICore: 1, AICPU: 1},
						{Name: "vir02", Memory: 6144, AICore: 2, AICPU: 2},
					}),
					ascendChip("910B3", "Ascend910B3", 65536, 65536, 20, 7, []VNPUTemplate{
						{Name: "vir05_1c_16g", Memory: 16384, AICore: 5, AICPU: 1},
					}),
				}}
			},
		},
		{
			name: "vnpus object form with hamiVnpuCore",
			file: "vnpus-object.yaml",
			want: func(c *Config) {
				c.VNPUs = VNPUs{HAMiVNPUCore: true, Configs: []VNPUConfig{
					ascendChip("910B4", "Ascend910B4", 32768, 32768, 20, 7, []VNPUTemplate{
						{Name: "vir05_1c_8g", Memory: 8192, AICore: 5, AICPU: 1},
						{Name: "vir10_3c_16g", Memory: 16384, AICore: 10, AICPU: 3},
					}),
				}}
			},
		},
		{
			name: "per-node overrides, zero meaning no override",
			file: "nodeconfig.yaml",
			want: func(c *Config) {
				c.NVIDIA.DeviceSplitCount = 8
				c.NodeConfigs = []NodeConfig{
					{
						Name: "gpu-node-1", OperatingMode: "hami-core", MIGStrategy: "none",
						DeviceMemoryScaling: ptr(1.5), DeviceSplitCount: ptr[int32](4),
						FilterDevices: &FilterDevices{UUID: []string{"GPU-0f6a1f0c-7d2b-4b44-9f43-6f1b7c2e9a10"}, Index: []int32{3}},
					},
					{Name: "gpu-node-2", OperatingMode: "mig", EnableGetPreferredAllocation: ptr(true), DeviceCoreScaling: ptr(2.0)},
					{Name: "gpu-node-3"},
				}
			},
		},
		{
			name: "upstream node config JSON document",
			file: "volcano-vgpu-node-config.json",
			want: func(c *Config) {
				c.NodeConfigs = []NodeConfig{{
					Name: "aio-node67", OperatingMode: "hami-core", MIGStrategy: "none",
					DeviceMemoryScaling: ptr(1.8), DeviceSplitCount: ptr[int32](10),
					FilterDevices: &FilterDevices{UUID: []string{}, Index: []int32{}},
				}}
			},
		},
		{
			name: "MIG geometries as bare lists get positional group names",
			file: "mig-list-form.yaml",
			want: func(c *Config) {
				c.NVIDIA.KnownMIGGeometries = []AllowedMIGGeometries{{
					Models: []string{"A30"},
					Geometries: []MIGGeometry{
						{Group: "group1", Instances: []MIGTemplate{{Name: "1g.6gb", Memory: 6144, Count: 4}}},
						{Group: "group2", Instances: []MIGTemplate{
							{Name: "2g.12gb", Memory: 12288, Count: 1},
							{Name: "1g.6gb", Memory: 6144, Count: 2, Core: 25},
						}},
					},
				}}
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Parse(readTestdata(t, tc.file))
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

func wantHAMiChart(c *Config) {
	n := &c.NVIDIA
	n.ResourceCountName = "nvidia.com/gpu"
	n.ResourceMemoryName = "nvidia.com/gpumem"
	n.ResourceMemoryPercentageName = "nvidia.com/gpumem-percentage"
	n.ResourceCoreName = "nvidia.com/gpucores"
	n.ResourcePriorityName = "nvidia.com/priority"
	n.MemoryFactor = 1
	n.GPUCorePolicy = "default"
	n.LibCudaLogLevel = "1"
	chips := defaultVNPUConfigs()
	c910C := ascendChip("Ascend910", "Ascend910C", 65536, 65536, 20, 7, cloneSlice(chips[2].Templates))
	c.VNPUs = VNPUs{Configs: []VNPUConfig{chips[0], chips[5], c910C}}
	c.IgnoredSections = []string{"amd", "awsneuron", "cambricon", "hygon", "iluvatars", "metax", "mthreads", "vastai"}
}

// HAMi's chart document carries two keys nothing here acts on
// (migProfileAllowlist, and superPod on its 910C entry): it is refused with
// exactly those two errors, and parses once they are taken out.
func TestParseHAMiChartDocument(t *testing.T) {
	doc := string(readTestdata(t, "hami-chart.yaml"))
	_, err := Parse([]byte(doc))
	want := "validate device config: [" +
		`nvidia.migProfileAllowlist: Unsupported value: "models [A30] profiles [1g.6gb 2g.12gb 4g.24gb]; ` +
		`models [A100-SXM4-40GB A100-40GB-PCIe A100-PCIE-40GB] profiles [1g.5gb 2g.10gb 3g.20gb 7g.40gb]; ` +
		`models [H100-PCIE-80GB H100-SXM5-80GB] profiles [1g.10gb 2g.20gb 3g.40gb 7g.80gb]": ` +
		"not supported: MIG instances are placed by the layouts of nvidia.knownMigGeometries, which no allowlist restricts; " +
		"keep only the layouts you allow there for these models and remove the key, " +
		"vnpus.configs[2].superPod: Unsupported value: true: not supported: requests for super-pod chips are not rounded up " +
		"to whole modules (HAMi's webhook does that); ask for chips in pairs and remove the key, or set it to false]"
	if err == nil || err.Error() != want {
		t.Fatalf("Parse(hami-chart.yaml) error:\n  %v\nwant:\n  %s", err, want)
	}

	start := strings.Index(doc, "  migProfileAllowlist:\n")
	end := strings.Index(doc, "cambricon:\n")
	if start < 0 || end < start || !strings.Contains(doc, "superPod: true") {
		t.Fatal("hami-chart.yaml no longer has the keys this test takes out")
	}
	doc = doc[:start] + doc[end:]
	doc = strings.Replace(doc, "superPod: true", "superPod: false", 1)
	got, err := Parse([]byte(doc))
	if err != nil {
		t.Fatalf("Parse(hami-chart.yaml without the refused keys) error: %v", err)
	}
	want2 := Default()
	wantHAMiChart(want2)
	if diff := cmp.Diff(want2, got); diff != "" {
		t.Errorf("Parse() mismatch (-want +got):\n%s", diff)
	}
}

func TestParseEmptyDocumentIsDefault(t *testing.T) {
	for _, doc := range []string{"", "# only a comment\n", "null", "nvidia:\nvnpus:\n"} {
		got, err := Parse([]byte(doc))
		if err != nil {
			t.Fatalf("Parse(%q) error: %v", doc, err)
		}
		if diff := cmp.Diff(Default(), got); diff != "" {
			t.Errorf("Parse(%q) mismatch (-want +got):\n%s", doc, diff)
		}
	}
}

func TestParseExplicitlyEmptyCatalogues(t *testing.T) {
	got, err := Parse([]byte("nvidia:\n  knownMigGeometries: []\nvnpus: []\n"))
	if err != nil {
		t.Fatalf("Parse() error: %v", err)
	}
	if len(got.NVIDIA.KnownMIGGeometries) != 0 || got.NVIDIA.KnownMIGGeometries == nil {
		t.Errorf("knownMigGeometries = %v, want empty, not the default catalogue", got.NVIDIA.KnownMIGGeometries)
	}
	if len(got.VNPUs.Configs) != 0 || got.VNPUs.Configs == nil {
		t.Errorf("vnpus = %v, want empty, not the default catalogue", got.VNPUs.Configs)
	}
}

func TestFromConfigMap(t *testing.T) {
	meta := metav1.ObjectMeta{Namespace: DefaultConfigMapNamespace, Name: DefaultConfigMapName}
	tests := []struct {
		name    string
		cm      *v1.ConfigMap
		wantErr []string
		wantIs  error
	}{
		{
			name: "data key",
			cm:   &v1.ConfigMap{ObjectMeta: meta, Data: map[string]string{ConfigKey: "nvidia:\n  deviceSplitCount: 4\n"}},
		},
		{
			name: "binaryData key",
			cm:   &v1.ConfigMap{ObjectMeta: meta, BinaryData: map[string][]byte{ConfigKey: []byte("nvidia:\n  deviceSplitCount: 4\n")}},
		},
		{
			name:    "missing key names namespace, name and key",
			cm:      &v1.ConfigMap{ObjectMeta: meta, Data: map[string]string{"config.yaml": ""}},
			wantErr: []string{"kube-system/volcano-vgpu-device-config", `key "device-config.yaml" not found`, "[config.yaml]"},
			wantIs:  ErrMissingKey,
		},
		{
			name:    "bad document names the ConfigMap and the path",
			cm:      &v1.ConfigMap{ObjectMeta: meta, Data: map[string]string{ConfigKey: "nvidia:\n  deviceSplitCount: 0\n"}},
			wantErr: []string{"kube-system/volcano-vgpu-device-config key device-config.yaml", "nvidia.deviceSplitCount: Invalid value: 0"},
		},
		{
			name:    "nil ConfigMap",
			wantErr: []string{"nil ConfigMap"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FromConfigMap(tc.cm)
			if len(tc.wantErr) == 0 {
				if err != nil {
					t.Fatalf("FromConfigMap() error: %v", err)
				}
				if got.NVIDIA.DeviceSplitCount != 4 {
					t.Errorf("deviceSplitCount = %d, want 4", got.NVIDIA.DeviceSplitCount)
				}
				return
			}
			if err == nil {
				t.Fatalf("FromConfigMap() = nil error, want %q", tc.wantErr)
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("FromConfigMap() error = %q, want it to contain %q", err, want)
				}
			}
			if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
				t.Errorf("FromConfigMap() error = %v, want errors.Is %v", err, tc.wantIs)
			}
		})
	}
}
