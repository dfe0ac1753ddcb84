package nvidia_test

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

func discover(t *testing.T, machine string) []nvidia.GPU {
	t.Helper()
	srv, err := nvmlmock.New(machine, nvmlmock.WithSeed("node-a"))
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := nvidia.Discover(srv)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return gpus
}

func numaNodes(gpus []nvidia.GPU) []int {
	out := make([]int, len(gpus))
	for i, g := range gpus {
		out[i] = g.NUMANode
	}
	return out
}

// scoreMatrix is the inventory's scores as rows, for readable diffs.
func scoreMatrix(gpus []nvidia.GPU) [][]int32 {
	inv := nvidia.NewInventory("n", gpus, config.Default(), nvidia.UnitMiB)
	s := inv.Scores()
	if s == nil {
		return nil
	}
	n := len(gpus)
	out := make([][]int32, n)
	for i := range out {
		out[i] = s[i*n : (i+1)*n]
	}
	return out
}

func TestTopologyDGXA100(t *testing.T) {
	gpus := discover(t, "dgxa100")
	if diff := cmp.Diff([]int{3, 3, 1, 1, 7, 7, 5, 5}, numaNodes(gpus)); diff != "" {
		t.Errorf("NUMA nodes (-want +got):\n%s", diff)
	}
	// NV12 through NVSwitches between every pair; a pair behind one PCIe
	// switch tree is PXB (40), the others SYS (10).
	want := [][]int32{}
	for i := 0; i < 8; i++ {
		row := make([]int32, 8)
		for j := range row {
			switch {
			case i == j:
			case i/2 == j/2:
				row[j] = 1240
			default:
				row[j] = 1210
			}
		}
		want = append(want, row)
	}
	if diff := cmp.Diff(want, scoreMatrix(gpus)); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	if l := gpus[0].Links[5]; !l.ViaSwitch || l.NVLinks != 12 {
		t.Errorf("link 0-5 = %+v, want 12 NVLinks via NVSwitch", l)
	}
}

func TestTopologyPCIeH100(t *testing.T) {
	gpus := discover(t, nvmlmock.MachinePCIeH100)
	if diff := cmp.Diff([]int{0, 0, 0, 0, 1, 1, 1, 1}, numaNodes(gpus)); diff != "" {
		t.Errorf("NUMA nodes (-want +got):\n%s", diff)
	}
	if gpus[0].Name != "NVIDIA H100 PCIe" {
		t.Errorf("name = %q", gpus[0].Name)
	}
	m := scoreMatrix(gpus)
	for _, c := range []struct {
		a, b int
		want int32
	}{{0, 1, 1250}, {2, 3, 1250}, {0, 2, 50}, {1, 3, 50}, {3, 4, 10}, {4, 5, 1250}, {5, 6, 50}} {
		if m[c.a][c.b] != c.want || m[c.b][c.a] != c.want {
			t.Errorf("score %d<->%d = %d/%d, want %d", c.a, c.b, m[c.a][c.b], m[c.b][c.a], c.want)
		}
	}
	if l := gpus[0].Links[1]; l.ViaSwitch || l.NVLinks != 12 || l.Level != nvml.TOPOLOGY_SINGLE {
		t.Errorf("link 0-1 = %+v, want 12 direct NVLinks on one PCIe switch", l)
	}
}

func TestTopologyWithoutNVLink(t *testing.T) {
	gpus := discover(t, nvmlmock.MachinePCIeA30)
	if diff := cmp.Diff([]int{0, 0, 1, 1}, numaNodes(gpus)); diff != "" {
		t.Errorf("NUMA nodes (-want +got):\n%s", diff)
	}
	want := [][]int32{{0, 50, 10, 10}, {50, 0, 10, 10}, {10, 10, 0, 50}, {10, 10, 50, 0}}
	if diff := cmp.Diff(want, scoreMatrix(gpus)); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

// TestTopologyNotSupported checks that a driver answering NOT_SUPPORTED to
// every topology call (old GPUs, consumer cards) gives GPUs without NUMA
// node or links, not an error.
func TestTopologyNotSupported(t *testing.T) {
	newDev := func(uuid string) *mock.Device {
		return &mock.Device{
			GetUUIDFunc:        func() (string, nvml.Return) { return uuid, nvml.SUCCESS },
			GetNameFunc:        func() (string, nvml.Return) { return "NVIDIA GeForce RTX 3090", nvml.SUCCESS },
			GetMemoryInfoFunc:  func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 24 << 30}, nvml.SUCCESS },
			GetMinorNumberFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
			GetMigModeFunc:     func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
			GetNumaNodeIdFunc:  func() (int, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
			GetPciInfoFunc:     func() (nvml.PciInfo, nvml.Return) { return nvml.PciInfo{}, nvml.ERROR_NOT_SUPPORTED },
			GetNvLinkStateFunc: func(int) (nvml.EnableState, nvml.Return) { return 0, nvml.ERROR_NOT_SUPPORTED },
			GetMemoryAffinityFunc: func(int, nvml.AffinityScope) ([]uint, nvml.Return) {
				return nil, nvml.ERROR_NOT_SUPPORTED
			},
			GetTopologyCommonAncestorFunc: func(nvml.Device) (nvml.GpuTopologyLevel, nvml.Return) {
				return 0, nvml.ERROR_NOT_SUPPORTED
			},
		}
	}
	devs := []nvml.Device{newDev("GPU-a"), newDev("GPU-b")}
	lib := &mock.Interface{
		DeviceGetCountFunc:         func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return devs[i], nvml.SUCCESS },
	}
	gpus, err := nvidia.Discover(lib)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if diff := cmp.Diff([]int{-1, -1}, numaNodes(gpus)); diff != "" {
		t.Errorf("NUMA nodes (-want +got):\n%s", diff)
	}
	if m := scoreMatrix(gpus); m != nil {
		t.Errorf("scores = %v, want none", m)
	}
}

// TestMockUUIDsPerNode checks that two simulated nodes of one machine do
// not share UUIDs, and that one node's are stable.
func TestMockUUIDsPerNode(t *testing.T) {
	a1, _ := nvmlmock.New("dgxa100", nvmlmock.WithSeed("node-a"))
	a2, _ := nvmlmock.New("dgxa100", nvmlmock.WithSeed("node-a"))
	b, _ := nvmlmock.New("dgxa100", nvmlmock.WithSeed("node-b"))
	if diff := cmp.Diff(a1.UUIDs(), a2.UUIDs()); diff != "" {
		t.Errorf("same node, different UUIDs (-first +second):\n%s", diff)
	}
	seen := map[string]bool{}
	for _, u := range append(a1.UUIDs(), b.UUIDs()...) {
		if seen[u] {
			t.Errorf("UUID %s on both nodes", u)
		}
		seen[u] = true
	}
}

func TestTopologyDGXH100(t *testing.T) {
	gpus := discover(t, "dgxh100")
	if diff := cmp.Diff([]int{0, 0, 0, 0, 1, 1, 1, 1}, numaNodes(gpus)); diff != "" {
		t.Errorf("NUMA nodes (-want +got):\n%s", diff)
	}
	m := scoreMatrix(gpus)
	// NV18 everywhere; NODE (20) within a socket, SYS (10) across.
	if m[0][3] != 1820 || m[0][4] != 1810 || m[7][4] != 1820 {
		t.Errorf("scores 0-3, 0-4, 7-4 = %d, %d, %d; want 1820, 1810, 1820", m[0][3], m[0][4], m[7][4])
	}
}
