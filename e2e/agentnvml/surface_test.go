//go:build e2e

package agentnvml

import (
	"bufio"
	"errors"
	"fmt"
	"math/bits"
	"net"
	"os"
	"strings"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

// handle returns card i's handle.
func handle(t *testing.T, i int) nvml.Device {
	t.Helper()
	d, ret := lib.DeviceGetHandleByIndex(i)
	if ret != nvml.SUCCESS {
		t.Fatalf("DeviceGetHandleByIndex(%d): %v", i, ret)
	}
	return d
}

// cpusOf lists the CPUs set in an affinity bitmask.
func cpusOf(mask []uint) []int {
	var out []int
	for w, word := range mask {
		for word != 0 {
			b := bits.TrailingZeros(word)
			out = append(out, w*64+b)
			word &^= 1 << b
		}
	}
	return out
}

// cString is a NUL-terminated C string in an array of char.
func cString(b []int8) string {
	var s strings.Builder
	for _, c := range b {
		if c == 0 {
			break
		}
		s.WriteByte(byte(c))
	}
	return s.String()
}

// Each NVML query a node's tools make answers as the NVML reference
// documents for the configured card: its value, or the documented error
// where the card lacks the feature.
func TestNVMLSurface(t *testing.T) {
	cfg := nodeConfig()
	if n, ret := lib.DeviceGetCount(); ret != nvml.SUCCESS || n != len(cfg.Devices) {
		t.Fatalf("DeviceGetCount: %d, %v; want %d", n, ret, len(cfg.Devices))
	}
	if v, ret := lib.SystemGetDriverVersion(); ret != nvml.SUCCESS || v != cfg.DriverVersion {
		t.Errorf("SystemGetDriverVersion: %q, %v; want %q", v, ret, cfg.DriverVersion)
	}
	for i, d := range cfg.Devices {
		t.Run(fmt.Sprintf("card%d", i), func(t *testing.T) {
			dev := handle(t, i)
			pci, ret := dev.GetPciInfo()
			busID := cString(pci.BusId[:])
			if ret != nvml.SUCCESS || busID != d.PCIBusID || pci.PciDeviceId != d.PCIDeviceID {
				t.Errorf("GetPciInfo: %s %#x, %v; want %s %#x", busID, pci.PciDeviceId, ret, d.PCIBusID, d.PCIDeviceID)
			}
			// Every form the reference accepts names the card.
			for _, id := range []string{d.PCIBusID, strings.ToLower(d.PCIBusID), d.PCIBusID[:len(d.PCIBusID)-2],
				strings.TrimPrefix(d.PCIBusID, "00000000:")} {
				byBus, ret := lib.DeviceGetHandleByPciBusId(id)
				if u, _ := byBus.GetUUID(); ret != nvml.SUCCESS || u != d.UUID {
					t.Errorf("DeviceGetHandleByPciBusId(%s): %s, %v; want %s", id, u, ret, d.UUID)
				}
			}
			major, minor, ret := dev.GetCudaComputeCapability()
			if got := fmt.Sprintf("%d.%d", major, minor); ret != nvml.SUCCESS || got != d.ComputeCapability {
				t.Errorf("GetCudaComputeCapability: %s, %v; want %s", got, ret, d.ComputeCapability)
			}
			if _, ret := dev.GetNumaNodeId(); ret != nvml.ERROR_NOT_SUPPORTED {
				t.Errorf("GetNumaNodeId: %v, want NOT_SUPPORTED (not a GPU that is a NUMA node)", ret)
			}
			cpus, ret := dev.GetCpuAffinity(64)
			switch {
			case len(d.CPUs) == 0 && ret != nvml.ERROR_NOT_SUPPORTED:
				t.Errorf("GetCpuAffinity: %v, want NOT_SUPPORTED (no affinity configured)", ret)
			case len(d.CPUs) > 0 && (ret != nvml.SUCCESS || !cmp.Equal(cpusOf(cpus), d.CPUs)):
				t.Errorf("GetCpuAffinity: CPUs %v, %v; want %v", cpusOf(cpus), ret, d.CPUs)
			}
			current, pending, ret := dev.GetMigMode()
			switch {
			case !d.MIGCapable && ret != nvml.ERROR_NOT_SUPPORTED:
				t.Errorf("GetMigMode: %v, want NOT_SUPPORTED", ret)
			case d.MIGCapable && (ret != nvml.SUCCESS || current != nvml.DEVICE_MIG_DISABLE || pending != nvml.DEVICE_MIG_DISABLE):
				t.Errorf("GetMigMode: %d %d, %v; want disabled", current, pending, ret)
			}
			if n, ret := dev.GetMaxMigDeviceCount(); ret != nvml.SUCCESS || n != 0 {
				t.Errorf("GetMaxMigDeviceCount: %d, %v; want 0 (MIG not enabled)", n, ret)
			}
			if _, ret := dev.GetNvLinkState(len(d.NVLinks)); len(d.NVLinks) > 0 && ret != nvml.ERROR_INVALID_ARGUMENT ||
				len(d.NVLinks) == 0 && ret != nvml.ERROR_NOT_SUPPORTED {
				t.Errorf("GetNvLinkState(%d) of a card with %d links: %v", len(d.NVLinks), len(d.NVLinks), ret)
			}
			if types, ret := dev.GetSupportedEventTypes(); ret != nvml.SUCCESS || types != nvml.EventTypeXidCriticalError {
				t.Errorf("GetSupportedEventTypes: %#x, %v; want Xid critical errors only", types, ret)
			}
		})
	}
	// Nearest GPUs at a level: the cards that near or nearer.
	nearest := func(i int, l nvml.GpuTopologyLevel) []int {
		devs, ret := handle(t, i).GetTopologyNearestGpus(l)
		if ret != nvml.SUCCESS {
			t.Fatalf("GetTopologyNearestGpus(%d, %d): %v", i, l, ret)
		}
		var out []int
		for _, d := range devs {
			idx, _ := d.GetIndex()
			out = append(out, idx)
		}
		return out
	}
	for _, tc := range []struct {
		card  int
		level nvml.GpuTopologyLevel
		want  []int
	}{
		{0, nvml.TOPOLOGY_SINGLE, []int{1}}, {0, nvml.TOPOLOGY_HOSTBRIDGE, []int{1, 2}},
		{0, nvml.TOPOLOGY_NODE, []int{1, 2, 3}}, {4, nvml.TOPOLOGY_NODE, []int{5}}, {6, nvml.TOPOLOGY_NODE, nil},
	} {
		if got := nearest(tc.card, tc.level); !cmp.Equal(tc.want, got) {
			t.Errorf("nearest GPUs of %d at level %d: %v, want %v", tc.card, tc.level, got, tc.want)
		}
	}
	// Registering an event type the card cannot raise registers nothing.
	set, ret := lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	defer set.Free()
	if ret := handle(t, 0).RegisterEvents(nvml.EventTypeDoubleBitEccError|nvml.EventTypeXidCriticalError, set); ret != nvml.ERROR_NOT_SUPPORTED {
		t.Errorf("RegisterEvents(ECC|Xid): %v, want NOT_SUPPORTED", ret)
	}
	if _, ret := set.Wait(1); ret != nvml.ERROR_TIMEOUT {
		t.Errorf("Wait on an empty set: %v, want TIMEOUT", ret)
	}
	// Errors print with NVML's own strings (nvmlErrorString).
	if got := nvml.ERROR_NOT_SUPPORTED.Error(); got != "Not Supported" {
		t.Errorf("ERROR_NOT_SUPPORTED.Error() = %q, want NVML's \"Not Supported\"", got)
	}
	if _, ret := lib.DeviceGetHandleByUUID("GPU-ffffffff-0000-0000-0000-000000000000"); !errors.Is(ret, nvml.ERROR_NOT_FOUND) {
		t.Errorf("DeviceGetHandleByUUID(unknown): %v, want NOT_FOUND", ret)
	}
}

// Memory a process holds on a card and its context show in NVML's memory
// and process queries with the host pid, as the driver counts them.
func TestMemoryAndProcesses(t *testing.T) {
	c, err := net.Dial("unix", driver.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	r := bufio.NewReader(c)
	do := func(req string) {
		t.Helper()
		fmt.Fprintf(c, "%s\n", req)
		if resp, err := r.ReadString('\n'); err != nil || resp != "OK\n" {
			t.Fatalf("%s: %q, %v", req, resp, err)
		}
	}
	do("CTX 2 1")
	do(fmt.Sprint("ALLOC 2 ", 3*gib))
	defer func() { do(fmt.Sprint("FREE 2 ", 3*gib)); do("CTX 2 -1") }()
	dev := handle(t, 2)
	mem, ret := dev.GetMemoryInfo()
	if ret != nvml.SUCCESS || mem.Total != 40*gib || mem.Used != 3*gib || mem.Free != 37*gib {
		t.Errorf("GetMemoryInfo: %+v, %v; want 40 GiB total, 3 GiB used", mem, ret)
	}
	procs, ret := dev.GetComputeRunningProcesses()
	want := []nvml.ProcessInfo{{Pid: uint32(os.Getpid()), UsedGpuMemory: 3 * gib, GpuInstanceId: 0xFFFFFFFF, ComputeInstanceId: 0xFFFFFFFF}}
	if ret != nvml.SUCCESS || !cmp.Equal(want, procs) {
		t.Errorf("GetComputeRunningProcesses: %+v, %v; want %+v", procs, ret, want)
	}
	if u, ret := dev.GetUtilizationRates(); ret != nvml.SUCCESS || u.Gpu != 0 {
		t.Errorf("GetUtilizationRates: %+v, %v; want an idle card", u, ret)
	}
}

// The documented errors for arguments go-nvml never passes: short buffers,
// NULL pointers, an invalid handle, an index beyond the cards, malformed
// and unknown PCI bus IDs, invalid sizes, scopes, levels, links and event
// types (each function's page of the NVML reference).
func TestNVMLArgumentErrors(t *testing.T) {
	const (
		invalid      = 2 // NVML_ERROR_INVALID_ARGUMENT
		notFound     = 6 // NVML_ERROR_NOT_FOUND
		insufficient = 7 // NVML_ERROR_INSUFFICIENT_SIZE
	)
	path := stubDir + "/libnvidia-ml.so.1"
	want := map[string]int{
		"uuid-short": insufficient, "name-short": insufficient, "version-short": insufficient,
		"uuid-null": invalid, "minor-bad-handle": invalid, "index-beyond": invalid,
		"bus-malformed": invalid, "bus-unknown": notFound, "affinity-size-0": invalid,
		"affinity-bad-scope": invalid, "cpus-null": invalid, "nearest-bad-level": invalid,
		"nearest-null-array": invalid, "nvlink-36": invalid, "register-unknown-type": invalid,
		"wait-null-data": invalid,
	}
	got := map[string]int{}
	for what := range want {
		got[what] = CallStub(path, what)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("return codes (-want +got):\n%s", diff)
	}
	for rc, text := range map[int]string{0: "Success", 3: "Not Supported", 4: "Insufficient Permissions", 999: "Unknown Error", 12345: "Unknown Error"} {
		if got := StubErrorString(path, rc); got != text {
			t.Errorf("nvmlErrorString(%d) = %q, want %q", rc, got, text)
		}
	}
}
