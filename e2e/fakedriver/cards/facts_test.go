package cards

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The defaults describe a PCIe card of a one-socket server; INFO carries
// every fact, and the common ancestor follows switch, host bridge and
// NUMA node in that order.
func TestFactsDefaultsInfoAndTopology(t *testing.T) {
	minor := 7
	devs := []Device{
		{UUID: "GPU-a", TotalBytes: 1, SMs: 1, Name: "A"},
		{UUID: "GPU-b", TotalBytes: 1, SMs: 1, Name: "B", Minor: &minor, PCIBusID: "0000:3b:00.0", PCIDeviceID: 0x20B010DE,
			PCISubsystemID: 0x134F10DE, ComputeCapability: "9.0", MIGCapable: true, NUMANode: 1, CPUs: []int{16, 17},
			HostBridge: "hb1", PCIeSwitch: "sw1", NVLinks: []NVLink{{PeerUUID: "GPU-c"}, {SwitchBusID: "0:c1:0.0"}}},
		{UUID: "GPU-c", TotalBytes: 1, SMs: 1, Name: "C", NUMANode: 1, HostBridge: "hb1", PCIeSwitch: "sw1",
			NVLinks: []NVLink{{PeerUUID: "GPU-b"}}},
		{UUID: "GPU-d", TotalBytes: 1, SMs: 1, Name: "D", NUMANode: 1, HostBridge: "hb1"},
		{UUID: "GPU-e", TotalBytes: 1, SMs: 1, Name: "E", NUMANode: 1},
		{UUID: "GPU-f", TotalBytes: 1, SMs: 1, Name: "F", NUMANode: -1},
	}
	fs, err := Resolve(devs)
	if err != nil {
		t.Fatal(err)
	}
	infos := []string{fs[0].Info(), fs[1].Info(), fs[2].Info(), fs[5].Info()}
	want := []string{
		"8 0 0 0 0 0 - - 8",
		"9 0 1 548409566 323948766 1 16,17 gpu/00000000:03:00.0,switch/00000000:C1:00.0 8",
		"8 0 0 0 0 1 - gpu/00000000:3B:00.0 8",
		"8 0 0 0 0 - - - 8",
	}
	if diff := cmp.Diff(want, infos); diff != "" {
		t.Errorf("INFO fields (-want +got):\n%s", diff)
	}
	if fs[0].minor != 0 || fs[1].minor != 7 || fs[0].busID.String() != "00000000:01:00.0" {
		t.Errorf("defaults: minor %d, %d; bus ID %s", fs[0].minor, fs[1].minor, fs[0].busID)
	}
	levels := map[[2]int]int{
		{1, 1}: topoInternal, {1, 2}: topoSingle, {1, 3}: topoHostBridge, {1, 4}: topoNode,
		{1, 0}: topoSystem, {0, 5}: topoSystem, {5, 5}: topoInternal,
	}
	for pair, want := range levels {
		if got := CommonAncestor(&fs[pair[0]], &fs[pair[1]]); got != want {
			t.Errorf("common ancestor of %d and %d: %d, want %d", pair[0], pair[1], got, want)
		}
		if got := CommonAncestor(&fs[pair[1]], &fs[pair[0]]); got != want {
			t.Errorf("common ancestor of %d and %d: %d, want %d (symmetric)", pair[1], pair[0], got, want)
		}
	}
}
