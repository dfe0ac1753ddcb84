package mindcluster

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
)

// fuzzKeys are the names a registration error must mention one of.
var fuzzKeys = []string{LabelServerType, LabelChipName, string(ResourceNPUCore), AnnotationFreeChips, AnnotationUnhealthyChips,
	DeviceInfoKey}

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
		node.Labels[LabelServerType] = serverType
		if unhealthy != "" {
			node.Annotations[AnnotationUnhealthyChips] = unhealthy
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
	sick, err := parseChips(unhealthy)
	if err != nil {
		t.Fatalf("accepted unhealthy list %q: %v", unhealthy, err)
	}
	all, err := parseChips(free)
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

// FuzzDeviceInfo decodes the device-info ConfigMap's DeviceInfoCfg. With
// build false the document is the fuzzed text; with build true it is built
// from a fuzzed DeviceInfo with its correct CheckCode, so the fuzzer gets
// past the hash. A refusal names the ConfigMap and DeviceInfoCfg; an
// accepted document's CheckCode is the hash of its DeviceInfo, and its
// DeviceList written back by DeviceInfoData decodes the same. The node's
// inventory then follows the same rules as with annotations.
func FuzzDeviceInfo(f *testing.F) {
	list := map[string]string{AnnotationFreeChips: chips(0, 1), AnnotationUnhealthyChips: chips(1)}
	good := DeviceInfoData(list, 1700000000)[DeviceInfoKey]
	info, _ := json.Marshal(deviceInfo{DeviceList: list, UpdateTime: 1700000000})
	for _, s := range []struct {
		doc   string
		build bool
	}{
		{good, false},
		{strings.Replace(good, "Ascend310P-0", "Ascend310P-3", 1), false},
		{`{"DeviceInfo":null,"CheckCode":"x"}`, false},
		{`{"DeviceInfo":{"DeviceList":{}},"CheckCode":""}`, false},
		{`{`, false},
		{string(info), true},
		{`{"DeviceList": {"huawei.com/Ascend310P": "Ascend310P-0"}, "UpdateTime": 1, "Extra": [1, 2]}`, true},
		{`{"UpdateTime": 1}`, true},
		{`{"DeviceList": {"huawei.com/Ascend310P": "Ascend310P-9"}}`, true},
		{`{"DeviceList": 5}`, true},
	} {
		f.Add(s.doc, s.build)
	}
	f.Fuzz(func(t *testing.T, doc string, build bool) {
		if build {
			code, err := json.Marshal(hashOf(compact([]byte(doc))))
			if err != nil {
				return
			}
			doc = `{"DeviceInfo":` + doc + `,"CheckCode":` + string(code) + `}`
		}
		cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: DeviceInfoNamespace, Name: DeviceInfoPrefix + "n1"},
			Data: map[string]string{DeviceInfoKey: doc}}
		where := "ConfigMap " + DeviceInfoNamespace + "/" + DeviceInfoPrefix + "n1: " + DeviceInfoKey
		dl, err := parseDeviceInfo(cm)
		if err != nil {
			if !strings.HasPrefix(err.Error(), where) {
				t.Errorf("parseDeviceInfo error %q does not start with %q", err, where)
			}
		} else {
			checkDeviceList(t, cm, dl)
		}
		b := newBackend(t, Options{Source: fakeSource{"n1": cm}})
		node := node310P("n1", 4, chips(0))
		d, nerr := b.NewDevices(node)
		switch {
		case err != nil && nerr == nil:
			t.Fatalf("NewDevices accepted a node whose device-info parseDeviceInfo refuses: %v", err)
		case nerr != nil:
			checkNamed(t, nerr)
		case d != nil:
			free, ok := dl[AnnotationFreeChips]
			if !ok {
				free = chips(0)
			}
			checkChips(t, d.(*Devices), free, dl[AnnotationUnhealthyChips])
		}
	})
}

func checkDeviceList(t *testing.T, cm *v1.ConfigMap, dl map[string]string) {
	t.Helper()
	var doc deviceInfoDoc
	if err := json.Unmarshal([]byte(cm.Data[DeviceInfoKey]), &doc); err != nil {
		t.Fatalf("accepted a document that is not JSON: %v", err)
	}
	var info deviceInfo
	if err := json.Unmarshal(doc.DeviceInfo, &info); err != nil {
		t.Fatalf("accepted DeviceInfo that does not decode: %v", err)
	}
	if !checkCodeMatches(doc.CheckCode, doc.DeviceInfo, info) || dl == nil {
		t.Fatalf("accepted CheckCode %q for DeviceInfo %s", doc.CheckCode, doc.DeviceInfo)
	}
	back := &v1.ConfigMap{ObjectMeta: cm.ObjectMeta, Data: DeviceInfoData(dl, info.UpdateTime)}
	again, err := parseDeviceInfo(back)
	if err != nil {
		t.Fatalf("DeviceInfoData written back does not decode: %v", err)
	}
	if diff := cmp.Diff(dl, again); diff != "" {
		t.Errorf("DeviceList round trip (-decoded +re-decoded):\n%s", diff)
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
			pod.Annotations[AnnotationAscendReal] = real
		}
		acc := testkit.Account(t, d, pod, AnnotationNPUCore)
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
