//go:build e2e

package agentnvml

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// The fake node every test runs against (startNode).
var (
	driver *fakedriver.Driver
	// stubDir holds the stub libcuda.so.1 and libnvidia-ml.so.1.
	stubDir string
	// moduleRoot is the module's checkout.
	moduleRoot string
	// lib is go-nvml over the stub, initialised once: the test binary's
	// calls into the stub are bound on first use, so it is not unloaded
	// until the process ends.
	lib nvml.Interface
)

const gib = uint64(1) << 30

func minor(m int) *int { return &m }

// switchLinks are six NVLinks to NVSwitches.
func switchLinks() []fakedriver.NVLink {
	var out []fakedriver.NVLink
	for i := 0; i < 6; i++ {
		out = append(out, fakedriver.NVLink{SwitchBusID: fmt.Sprintf("00000000:%02X:00.0", 0xC1+i)})
	}
	return out
}

// nodeConfig is the node's seven cards: four A100-SXM4-40GB on NUMA node 0
// (0 and 1 behind one PCIe switch with two NVLinks between them, 2 behind
// another switch of the same host bridge, 3 behind another host bridge),
// two A100-SXM4-80GB on NUMA node 1 behind one switch, each with six
// NVLinks to NVSwitches, and a T4 with no NUMA node, MIG or NVLink and
// minor number 9.
func nodeConfig() fakedriver.Config {
	a100 := func(uuid, bus string, m, numa int, hb, sw string, cpus []int) fakedriver.Device {
		return fakedriver.Device{UUID: uuid, TotalBytes: 40 * gib, SMs: 108, Name: "NVIDIA A100-SXM4-40GB",
			Minor: minor(m), PCIBusID: bus, PCIDeviceID: 0x20B010DE, PCISubsystemID: 0x134F10DE,
			ComputeCapability: "8.0", MIGCapable: true, NUMANode: numa, CPUs: cpus, HostBridge: hb, PCIeSwitch: sw}
	}
	node0, node1 := []int{0, 1, 2, 3, 4, 5, 6, 7}, []int{8, 9, 10, 11, 12, 13, 14, 15}
	devs := []fakedriver.Device{
		a100("GPU-a0000000-0000-4000-8000-000000000000", "00000000:07:00.0", 0, 0, "hb0", "sw0", node0),
		a100("GPU-a1111111-1111-4111-8111-111111111111", "00000000:0F:00.0", 1, 0, "hb0", "sw0", node0),
		a100("GPU-a2222222-2222-4222-8222-222222222222", "00000000:47:00.0", 2, 0, "hb0", "sw1", node0),
		a100("GPU-a3333333-3333-4333-8333-333333333333", "00000000:4E:00.0", 3, 0, "hb1", "", node0),
		a100("GPU-a4444444-4444-4444-8444-444444444444", "00000000:87:00.0", 4, 1, "hb2", "sw2", node1),
		a100("GPU-a5555555-5555-4555-8555-555555555555", "00000000:90:00.0", 5, 1, "hb2", "sw2", node1),
		{UUID: "GPU-b6666666-6666-4666-8666-666666666666", TotalBytes: 15 * gib, SMs: 40, Name: "Tesla T4",
			Minor: minor(9), PCIBusID: "00000000:B1:00.0", PCIDeviceID: 0x1EB810DE, ComputeCapability: "7.5", NUMANode: -1},
	}
	for _, i := range []int{4, 5} {
		devs[i].TotalBytes, devs[i].Name = 80*gib, "NVIDIA A100-SXM4-80GB"
		devs[i].NVLinks = switchLinks()
	}
	devs[0].NVLinks = []fakedriver.NVLink{{PeerUUID: devs[1].UUID}, {PeerUUID: devs[1].UUID}}
	devs[1].NVLinks = []fakedriver.NVLink{{PeerUUID: devs[0].UUID}, {PeerUUID: devs[0].UUID}}
	return fakedriver.Config{Devices: devs, WaveNS: 250000, DriverVersion: "535.161.08"}
}

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agentnvml:", err)
		code = 1
	}
	os.Exit(code)
}

// run builds the stub, starts the driver with device nodes and points the
// stub at its control socket for the whole test process.
func run(m *testing.M) (int, error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return 0, err
	}
	moduleRoot = root
	if out, err := exec.Command("make", "-C", filepath.Join(root, "libvgpu"),
		"build/stub/libcuda.so.1", "build/stub/libnvidia-ml.so.1").CombinedOutput(); err != nil {
		return 0, fmt.Errorf("build the stub: %w\n%s", err, out)
	}
	stubDir = filepath.Join(root, "libvgpu", "build", "stub")
	dir, err := os.MkdirTemp("", "agentnvml-")
	if err != nil {
		return 0, err
	}
	defer os.RemoveAll(dir)
	if driver, err = fakedriver.StartDeviceNodes(filepath.Join(dir, "dev"), nodeConfig()); err != nil {
		return 0, err
	}
	defer driver.Close()
	// Read by the stub when go-nvml first loads it (cgo keeps the C
	// environment in step with os.Setenv).
	if err := os.Setenv("VGPU_STUB_DRIVER_SOCKET", driver.Path()); err != nil {
		return 0, err
	}
	lib = nvml.New(nvml.WithLibraryPath(filepath.Join(stubDir, "libnvidia-ml.so.1")))
	if ret := lib.Init(); ret != nvml.SUCCESS {
		return 0, fmt.Errorf("nvml Init over the stub: %v", ret)
	}
	defer lib.Shutdown()
	return m.Run(), nil
}
