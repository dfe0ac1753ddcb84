package mindcluster

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// deviceInfoCM builds the device plugin's ConfigMap for node with data.
func deviceInfoCM(node string, data map[string]string) *v1.ConfigMap {
	return &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: mindclusterproto.DeviceInfoNamespace, Name: mindclusterproto.DeviceInfoPrefix + node,
		ResourceVersion: "7"}, Data: data}
}

func validCM(node string, list map[string]string) *v1.ConfigMap {
	return deviceInfoCM(node, mindclusterproto.DeviceInfoData(list, 1700000000))
}

func TestNewDevicesInventory(t *testing.T) {
	freeOnly := map[string]string{mindclusterproto.AnnotationFreeChips: chips(2, 3)}
	tests := []struct {
		name   string
		node   *v1.Node
		cm     *v1.ConfigMap
		status string
	}{
		{name: "annotations alone", node: node310P("n", 4, chips(0, 1, 2), mindclusterproto.AnnotationUnhealthyChips, chips(2)),
			status: "Ascend310P-0: cores 0/8, cpus 0/7, [], whole 0; Ascend310P-1: cores 0/8, cpus 0/7, [], whole 0; " +
				"Ascend310P-2: cores 0/8, cpus 0/7, [], whole 0, unhealthy; in flight 0"},
		{name: "the ConfigMap overrides the annotation key by key", node: node310P("n", 4, chips(0, 1), mindclusterproto.AnnotationUnhealthyChips, chips(1)),
			cm: validCM("n", freeOnly),
			status: "Ascend310P-1: cores 0/8, cpus 0/7, [], whole 0, unhealthy; Ascend310P-2: cores 0/8, cpus 0/7, [], whole 0; " +
				"Ascend310P-3: cores 0/8, cpus 0/7, [], whole 0; in flight 0"},
		{name: "empty entries are skipped and no chip is offered", node: node310P("n", 2, ","), status: "in flight 0"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t, Options{Source: fakeSource{"n": tc.cm}})
			if tc.cm == nil {
				b = newBackend(t, Options{})
			}
			d := newDevicesFor(t, b, tc.node)
			if diff := cmp.Diff(tc.status, d.GetStatus()); diff != "" {
				t.Errorf("status (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNewDevicesOtherNodes(t *testing.T) {
	b := newBackend(t, Options{})
	noCapacity := node310P("n", 2, chips(0, 1))
	delete(noCapacity.Status.Capacity, mindclusterproto.ResourceNPUCore)
	zero := node310P("n", 0, "")
	ascend910 := node310P("n", 2, "")
	ascend910.Labels[mindclusterproto.LabelServerType] = "Ascend910-32"
	delete(ascend910.Annotations, mindclusterproto.AnnotationFreeChips)
	for name, n := range map[string]*v1.Node{"no capacity": noCapacity, "zero capacity": zero, "910 node": ascend910} {
		if d, err := b.NewDevices(n); d != nil || err != nil {
			t.Errorf("%s: NewDevices = %v, %v; want nil, nil", name, d, err)
		}
	}
}

// TestNewDevicesRejects checks that every malformed input names its
// field, value or ConfigMap key.
func TestNewDevicesRejects(t *testing.T) {
	good := map[string]string{mindclusterproto.AnnotationFreeChips: chips(0)}
	mismatched := mindclusterproto.DeviceInfoData(good, 1)
	mismatched[mindclusterproto.DeviceInfoKey] = strings.Replace(mismatched[mindclusterproto.DeviceInfoKey], `"UpdateTime":1`, `"UpdateTime":2`, 1)
	noList, _ := json.Marshal(map[string]any{"DeviceInfo": map[string]any{"UpdateTime": 1},
		"CheckCode": mindclusterproto.DeviceInfoCheckCode(nil, 1)})
	tests := []struct {
		name string
		edit func(n *v1.Node)
		cm   *v1.ConfigMap
		want []string
	}{
		{name: "no servertype", edit: func(n *v1.Node) { delete(n.Labels, mindclusterproto.LabelServerType) },
			want: []string{"label servertype is missing", "Ascend310P-8"}},
		{name: "servertype without cores", edit: func(n *v1.Node) { n.Labels[mindclusterproto.LabelServerType] = "Ascend310P-x" },
			want: []string{`label servertype="Ascend310P-x"`, "Ascend310P-<AI cores per chip>"}},
		{name: "chips too small for templates", edit: func(n *v1.Node) { n.Labels[mindclusterproto.LabelServerType] = "Ascend310P-2" },
			want: []string{`label servertype="Ascend310P-2"`, "vir04"}},
		{name: "no chip name", edit: func(n *v1.Node) { delete(n.Labels, mindclusterproto.LabelChipName) },
			want: []string{"label node.kubernetes.io/npu.chip.name", "310P3"}},
		{name: "capacity not whole chips", edit: func(n *v1.Node) { n.Status.Capacity[mindclusterproto.ResourceNPUCore] = resource.MustParse("12") },
			want: []string{"capacity huawei.com/npu-core=12", "8 AI cores per chip"}},
		{name: "bad chip name", edit: func(n *v1.Node) { n.Annotations[mindclusterproto.AnnotationFreeChips] = "Ascend310P-0,Ascend910-1" },
			want: []string{"node annotations", "huawei.com/Ascend310P", `chip "Ascend910-1"`, "Ascend310P-<id>"}},
		{name: "bad unhealthy chip", edit: func(n *v1.Node) { n.Annotations[mindclusterproto.AnnotationUnhealthyChips] = "Ascend310P-01" },
			want: []string{"huawei.com/Ascend310P-Unhealthy", `chip "Ascend310P-01"`}},
		{name: "chip twice", edit: func(n *v1.Node) { n.Annotations[mindclusterproto.AnnotationFreeChips] = chips(1, 1) },
			want: []string{`chip "Ascend310P-1" listed twice`}},
		{name: "more chips than the capacity", edit: func(n *v1.Node) { n.Annotations[mindclusterproto.AnnotationFreeChips] = chips(0, 1, 2) },
			want: []string{"lists 3 chips", "huawei.com/npu-core=16", "makes 2 chips"}},
		{name: "no chip list anywhere", edit: func(n *v1.Node) { delete(n.Annotations, mindclusterproto.AnnotationFreeChips) },
			want: []string{"no huawei.com/Ascend310P chip list", "kube-system/mindx-dl-deviceinfo-n", "DeviceInfoCfg"}},
		{name: "ConfigMap without DeviceInfoCfg", cm: deviceInfoCM("n", map[string]string{"other": "x"}),
			want: []string{"ConfigMap kube-system/mindx-dl-deviceinfo-n", "data key DeviceInfoCfg is missing"}},
		{name: "ConfigMap not JSON", cm: deviceInfoCM("n", map[string]string{mindclusterproto.DeviceInfoKey: "{"}),
			want: []string{"mindx-dl-deviceinfo-n", "DeviceInfoCfg: invalid JSON"}},
		{name: "ConfigMap without DeviceInfo", cm: deviceInfoCM("n", map[string]string{mindclusterproto.DeviceInfoKey: `{"CheckCode":"a"}`}),
			want: []string{"DeviceInfoCfg.DeviceInfo is missing"}},
		{name: "DeviceInfo of the wrong shape", cm: deviceInfoCM("n", map[string]string{mindclusterproto.DeviceInfoKey: `{"DeviceInfo":{"DeviceList":[1]},"CheckCode":"a"}`}),
			want: []string{"DeviceInfoCfg.DeviceInfo:", "cannot unmarshal"}},
		{name: "no CheckCode", cm: deviceInfoCM("n", map[string]string{mindclusterproto.DeviceInfoKey: `{"DeviceInfo":{"DeviceList":{}}}`}),
			want: []string{"DeviceInfoCfg.CheckCode is empty"}},
		{name: "CheckCode mismatch", cm: deviceInfoCM("n", mismatched),
			want: []string{"DeviceInfoCfg.CheckCode=", "does not match DeviceInfo"}},
		{name: "no DeviceList", cm: deviceInfoCM("n", map[string]string{mindclusterproto.DeviceInfoKey: string(noList)}),
			want: []string{"DeviceInfoCfg.DeviceInfo.DeviceList is missing"}},
		{name: "bad chip in the ConfigMap", cm: validCM("n", map[string]string{mindclusterproto.AnnotationFreeChips: "Ascend310P-a"}),
			want: []string{"ConfigMap kube-system/mindx-dl-deviceinfo-n: huawei.com/Ascend310P", `chip "Ascend310P-a"`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n := node310P("n", 2, chips(0))
			if tc.edit != nil {
				tc.edit(n)
			}
			b := newBackend(t, Options{Source: fakeSource{"n": tc.cm}})
			if tc.cm == nil {
				b = newBackend(t, Options{Source: fakeSource{}})
			}
			d, err := b.NewDevices(n)
			if err == nil {
				t.Fatalf("NewDevices = %v, want an error with %q", d, tc.want)
			}
			for _, w := range append(tc.want, "node n") {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestInventoryKey(t *testing.T) {
	src := fakeSource{}
	b := newBackend(t, Options{Source: src})
	n := node310P("n", 2, chips(0, 1))
	keys := map[string]bool{b.InventoryKey(n): true}
	add := func(what string) {
		t.Helper()
		k := b.InventoryKey(n)
		if keys[k] {
			t.Errorf("%s did not change the inventory key %q", what, k)
		}
		keys[k] = true
	}
	src["n"] = validCM("n", map[string]string{mindclusterproto.AnnotationFreeChips: chips(0)})
	add("a new ConfigMap")
	src["n"] = src["n"].DeepCopy()
	src["n"].ResourceVersion = "8"
	add("a new ConfigMap resourceVersion")
	src["n"].ResourceVersion = ""
	add("a ConfigMap without resourceVersion")
	src["n"].Data = mindclusterproto.DeviceInfoData(map[string]string{mindclusterproto.AnnotationFreeChips: chips(1)}, 2)
	add("new data in a ConfigMap without resourceVersion")
	n.Annotations[mindclusterproto.AnnotationUnhealthyChips] = chips(1)
	add("the unhealthy annotation")
	n.Labels[mindclusterproto.LabelChipName] = "310P1"
	add("the chip name label")
	n.Status.Capacity[mindclusterproto.ResourceNPUCore] = resource.MustParse("24")
	add("the capacity")
}
