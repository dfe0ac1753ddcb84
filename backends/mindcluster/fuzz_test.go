package mindcluster

import (
	"strings"
	"testing"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// fuzzKeys are the names a registration error must mention one of.
var fuzzKeys = []string{mindclusterproto.LabelServerType, mindclusterproto.LabelChipName, string(mindclusterproto.ResourceNPUCore), mindclusterproto.AnnotationFreeChips, mindclusterproto.AnnotationUnhealthyChips,
	mindclusterproto.DeviceInfoKey}

// FuzzNewDevices decodes a 310P node whose servertype label, capacity and
// chip-list annotations are fuzzed. A refusal names the label, capacity or
// annotation at fault; an accepted node knows exactly the listed chips,
// never more than its capacity makes, marks exactly the unhealthy list
// unhealthy and has nothing in use.
func FuzzNewDevices(f *testing.F) {
	for _, s := range []struct {
		serverType, free, unhealthy string
		chips                       uint16
	}{
		{"Ascend310P-8", chips(0, 1, 2), "", 4},
		{"Ascend310P-8", chips(0, 1), chips(1), 2},
		{"Ascend310P-8-ipc", chips(0, 1), chips(2), 4},
		{"Ascend310P-8", ",Ascend310P-0,,", "", 1},
		{"Ascend310P-8", chips(0, 1, 2), "", 2},
		{"Ascend310P-8", "Ascend310P-00", "", 4},
		{"Ascend310P-8", "Ascend310P--1", "", 4},
		{"Ascend310P-8", chips(0, 0), "", 4},
		{"Ascend310P-8", "Ascend910-0", "", 4},
		{"Ascend310P-0", chips(0), "", 4},
		{"Ascend310P-x", chips(0), "", 4},
		{"Ascend310P", chips(0), "", 4},
		{"Ascend310P-7", chips(0), "", 4},
		{"Ascend910-8", chips(0), "", 4},
	} {
		f.Add(s.serverType, s.free, s.unhealthy, s.chips)
	}
	f.Fuzz(func(t *testing.T, serverType, free, unhealthy string, chips uint16) {
		node := node310P("n1", int(chips), free)
		node.Labels[mindclusterproto.LabelServerType] = serverType
		if unhealthy != "" {
			node.Annotations[mindclusterproto.AnnotationUnhealthyChips] = unhealthy
		}
		d, err := newBackend(t, Options{}).NewDevices(node)
		if err != nil {
			checkNamed(t, err)
			return
		}
		if d == nil {
			return
		}
		checkChips(t, d.(*Devices), free, unhealthy)
	})
}

func checkNamed(t *testing.T, err error) {
	t.Helper()
	for _, k := range fuzzKeys {
		if strings.Contains(err.Error(), k) {
			return
		}
	}
	t.Errorf("error %q names none of %q", err, fuzzKeys)
}

// checkChips checks a fresh node against the lists it was decoded from.
func checkChips(t *testing.T, d *Devices, free, unhealthy string) {
	t.Helper()
	sick, err := mindclusterproto.DecodeChips(unhealthy)
	if err != nil {
		t.Fatalf("accepted unhealthy list %q: %v", unhealthy, err)
	}
	all, err := mindclusterproto.DecodeChips(free)
	if err != nil {
		t.Fatalf("accepted free list %q: %v", free, err)
	}
	want := map[int]bool{} // chip ID -> healthy
	for _, id := range all {
		want[id] = true
	}
	for _, id := range sick {
		want[id] = false
	}
	if len(d.chips) != len(want) || len(want) > d.inv.totalChips {
		t.Fatalf("%d chips known from lists naming %d, capacity %d chips", len(d.chips), len(want), d.inv.totalChips)
	}
	for id, healthy := range want {
		c := d.chips[id]
		if c == nil || c.healthy != healthy || !c.listed || c.whole != 0 || c.slice.Instances != 0 {
			t.Errorf("chip %d: %+v, want listed, unused, healthy %v", id, c, healthy)
		}
	}
	usage, pods := d.CardUsage()
	if pods != 0 || len(usage) != len(want) {
		t.Errorf("CardUsage: %d cards, %d pods", len(usage), pods)
	}
}

// FuzzAddResource accounts a 310P pod whose huawei.com/npu-core and
// huawei.com/AscendReal are fuzzed, on a node of four 8-core chips
// offering three. A refusal names huawei.com/npu-core and changes nothing;
// an accepted value is canonical (encode writes it back byte for byte),
// names at most the node's chips, and SubResource restores exactly the
// state before AddResource.
func FuzzAddResource(f *testing.F) {
	for _, s := range []struct {
		value, real string
		cores       uint8
	}{
		{"0-vir01", "", 1},
		{"0-vir02_1c", "Ascend310P-2c.1cpu-105-0_3", 2},
		{"0-vir04_3c", "Ascend310P-1c-100-0_0", 4},
		{"0", "", 8},
		{"3", "", 8},
		{"0,1", "", 16},
		{"0,1,2,3", "", 32},
		{"0,1,2,3,4", "", 40},
		{"0,0", "", 16},
		{"00", "", 8},
		{"0-", "", 1},
		{"0-vir99", "", 1},
		{"0,1-vir01", "", 1},
		{"0-vir01", "x_9", 1},
		{"-1", "", 8},
		{"", "", 8},
	} {
		f.Add(s.value, s.real, s.cores)
	}
	node := node310P("n1", 4, chips(0, 1, 2))
	f.Fuzz(func(t *testing.T, value, real string, cores uint8) {
		d := newDevicesFor(t, newBackend(t, Options{}), node)
		pod := placed(corePod("p", int64(cores)), value, false)
		if real != "" {
			pod.Annotations[mindclusterproto.AnnotationAscendReal] = real
		}
		acc := testkit.Account(t, d, pod, mindclusterproto.AnnotationNPUCore)
		if acc == nil {
			return
		}
		if h, held := d.pods[pod.UID]; held {
			if got := h.encode(); got != value {
				t.Errorf("AddResource(%q) held as %q", value, got)
			}
			if len(d.chips) > d.inv.totalChips || h.vgroup < -1 || h.vgroup >= maxVGroups {
				t.Errorf("AddResource(%q): %d chips on a node of %d, vNPU group %d", value, len(d.chips), d.inv.totalChips, h.vgroup)
			}
		}
		acc.CheckRoundTrip(t)
	})
}
