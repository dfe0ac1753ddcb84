//go:build e2e

package agentnvml

import (
	"testing"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// The PCIe level between every two of nodeConfig's cards, written out from
// the configuration: 0 and 1 share a switch, 2 shares their host bridge, 3
// only their NUMA node, 4 and 5 share a switch on the other node, and the
// T4 has no NUMA node.
var wantLevels = [7][7]nvml.GpuTopologyLevel{
	{0, nvml.TOPOLOGY_SINGLE, nvml.TOPOLOGY_HOSTBRIDGE, nvml.TOPOLOGY_NODE, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM},
	{nvml.TOPOLOGY_SINGLE, 0, nvml.TOPOLOGY_HOSTBRIDGE, nvml.TOPOLOGY_NODE, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM},
	{nvml.TOPOLOGY_HOSTBRIDGE, nvml.TOPOLOGY_HOSTBRIDGE, 0, nvml.TOPOLOGY_NODE, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM},
	{nvml.TOPOLOGY_NODE, nvml.TOPOLOGY_NODE, nvml.TOPOLOGY_NODE, 0, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM},
	{nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, 0, nvml.TOPOLOGY_SINGLE, nvml.TOPOLOGY_SYSTEM},
	{nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SINGLE, 0, nvml.TOPOLOGY_SYSTEM},
	{nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, nvml.TOPOLOGY_SYSTEM, 0},
}

// wantGPUs is what the agent must find: every card of the configuration
// with its UUID, name, memory, minor number, NUMA node and MIG capability
// (MIG disabled: the fake driver does not partition), and the links of
// wantLevels with the configured NVLinks: two direct ones between 0 and 1,
// six to NVSwitches on each of 4 and 5 (the agent counts switch links as
// the smaller count of the two cards', doc.go of vgpu-device-plugin/nvidia).
func wantGPUs() []nvidia.GPU {
	cfg := nodeConfig()
	out := make([]nvidia.GPU, len(cfg.Devices))
	for i, d := range cfg.Devices {
		out[i] = nvidia.GPU{UUID: d.UUID, Index: i, Minor: *d.Minor, Name: d.Name,
			MemoryMiB: int64(d.TotalBytes >> 20), NUMANode: d.NUMANode, MIGCapable: d.MIGCapable,
			Links: make([]nvidia.Link, len(cfg.Devices))}
		for j := range cfg.Devices {
			if j != i {
				out[i].Links[j] = nvidia.Link{Level: wantLevels[i][j], LevelKnown: true}
			}
		}
	}
	out[0].Links[1].NVLinks, out[1].Links[0].NVLinks = 2, 2
	out[4].Links[5] = nvidia.Link{Level: nvml.TOPOLOGY_SINGLE, LevelKnown: true, NVLinks: 6, ViaSwitch: true}
	out[5].Links[4] = out[4].Links[5]
	return out
}

// The agent's production discovery over go-nvml, the stub and the fake
// driver finds the configured cards and their topology.
func TestDiscoverFindsTheConfiguredCards(t *testing.T) {
	gpus, err := nvidia.Discover(lib)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	if diff := cmp.Diff(wantGPUs(), gpus); diff != "" {
		t.Errorf("discovered GPUs (-want +got):\n%s", diff)
	}
}
