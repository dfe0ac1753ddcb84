package ascend

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
)

const fuzzChip = "Ascend910B3"

// FuzzNewDevices feeds NewDevices a node whose
// hami.io/node-register-<commonWord> is fuzzed. A refusal names the
// annotation; an accepted inventory has at most MaxCards cards, one per
// registered entry, each within the documented limits and unused.
func FuzzNewDevices(f *testing.F) {
	for _, s := range []string{
		"",
		"[]",
		`[{"id":"NPU-0","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true}]`,
		`[{"id":"NPU-0","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true,"custominfo":{"NetworkID":3}},{"id":"NPU-1","devmem":65536,"type":"Ascend910B3"}]`,
		`[{"id":"NPU-0","devmem":65536},{"id":"NPU-0","devmem":65536}]`,
		`[{"id":"NPU 0","devmem":1}]`,
		`[{"id":"NPU-0","count":-1,"devmem":1}]`,
		`[{"id":"NPU-0","devmem":0}]`,
		`[{"id":"NPU-0","devmem":1073741825}]`,
		`[{"id":"NPU-0","devmem":1,"numa":-2}]`,
		`[{"id":"NPU-0","devmem":1,"custominfo":{"NetworkID":1.5}}]`,
		`[{"id":"NPU-0","devmem":1,"custominfo":{"NetworkID":"x"}}]`,
		`{"id":"NPU-0"}`,
		`[{"id":"NPU-0","devmem":1e3}]`,
	} {
		f.Add(s, false)
	}
	f.Add(`[{"id":"NPU-0","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true}]`, true)
	f.Fuzz(func(t *testing.T, value string, hamiCore bool) {
		b := newTestBackend(t, fuzzChip, false)
		a := map[string]string{b.Keys().Register: value}
		if hamiCore {
			a[AnnotationNodeHAMiCore] = "true"
		}
		node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: a}}
		d, err := b.NewDevices(node)
		if err != nil {
			if d != nil {
				t.Errorf("NewDevices returned devices with the error %v", err)
			}
			if !strings.Contains(err.Error(), b.Keys().Register) {
				t.Errorf("NewDevices error %q does not name %s", err, b.Keys().Register)
			}
			return
		}
		if d == nil {
			return
		}
		var entries []json.RawMessage
		if err := json.Unmarshal([]byte(value), &entries); err != nil {
			t.Fatalf("NewDevices accepted %q, which is not a JSON list: %v", value, err)
		}
		usage, pods := d.(*Devices).CardUsage()
		if len(usage) != len(entries) || len(usage) > MaxCards || pods != 0 {
			t.Fatalf("NewDevices: %d cards and %d pods from %d entries (at most %d)", len(usage), pods, len(entries), MaxCards)
		}
		ids := map[string]bool{}
		for _, c := range usage {
			if ids[c.ID] || c.ID == "" || strings.ContainsAny(c.ID, ",:; ") {
				t.Errorf("card %q: duplicate or malformed ID accepted", c.ID)
			}
			ids[c.ID] = true
			if c.MemoryTotalMiB <= 0 || c.MemoryTotalMiB > MaxMemoryMiB || c.MaxPods < 0 || c.MaxPods > MaxCount || c.CoresTotal < 0 {
				t.Errorf("card %+v outside the limits", c)
			}
			if c.MemoryUsedMiB != 0 || c.CoresUsed != 0 || c.Pods != 0 {
				t.Errorf("fresh card %+v is in use", c)
			}
		}
	})
}

// FuzzAddResource accounts a pod whose hami.io/<commonWord>-devices-allocated
// is fuzzed, on a two-card node in either mode. A refusal names the
// annotation and leaves the state alone; an accepted record charges only
// registered cards, never more memory than a card has per use, and
// SubResource gives back exactly what AddResource took.
func FuzzAddResource(f *testing.F) {
	for _, s := range []string{
		"NPU-0,Ascend910B3,16384,0:;",
		"NPU-0,Ascend910B3,65536,0:NPU-1,Ascend910B3,65536,0:;;",
		"NPU-0,Ascend910B3,10000,30:;",
		"NPU-0,Ascend910B3,10000,30:",
		";NPU-1,Ascend910B3,1,100:;",
		"NPU-0,Ascend910B3,16384,0:NPU-0,Ascend910B3,16384,0:;",
		"NPU-9,Ascend910B3,16384,0:;",
		"NPU-0,Ascend310P,16384,0:;",
		"NPU-0,Ascend910B3,65537,0:;",
		"NPU-0,Ascend910B3,0,0:;",
		"NPU-0,Ascend910B3,1,101:;",
		"NPU-0,Ascend910B3,1,1;",
		";;;;",
		"",
	} {
		f.Add(s, uint8(2), false)
	}
	f.Add("NPU-0,Ascend910B3,10000,30:;", uint8(1), true)
	node := ascendNode("n1", fuzzChip, []card{npu("NPU-0", 65536), npu("NPU-1", 65536).inNetwork(1)})
	f.Fuzz(func(t *testing.T, value string, containers uint8, hamiCore bool) {
		b := newTestBackend(t, fuzzChip, hamiCore)
		d := devicesOf(t, b, node)
		pod := npuPod("p", fuzzChip, make([]ctr, 1+int(containers)%4), b.Keys().Allocated, value)
		acc := testkit.Account(t, d, pod, b.Keys().Allocated)
		if acc == nil {
			return
		}
		for _, c := range testkit.Usage(d) {
			if c.MemoryUsedMiB < 0 || c.CoresUsed < 0 || c.Pods < 0 || c.Pods > len(pod.Spec.Containers) {
				t.Errorf("card %+v after accounting %q", c, value)
			}
		}
		uses, err := d.decode(value, len(pod.Spec.Containers))
		if err != nil {
			t.Fatalf("AddResource accepted %q that decode refuses: %v", value, err)
		}
		again, err := d.decode(d.encode(uses, len(pod.Spec.Containers)), len(pod.Spec.Containers))
		if err != nil || !cmp.Equal(uses, again, cmp.AllowUnexported(use{})) {
			t.Errorf("decode(encode(decode(%q))) = %v, %v; want %v", value, again, err, uses)
		}
		acc.CheckRoundTrip(t)
	})
}

// FuzzDecodeAssignments checks the node agent's reader of
// hami.io/<commonWord>-devices-to-allocate: a refusal names the container
// or the empty value, an accepted value has no negative memory or cores and
// EncodeAssignments writes it back to a value that decodes the same.
func FuzzDecodeAssignments(f *testing.F) {
	for _, s := range []string{
		"NPU-0,Ascend910B3,16384,0:;",
		"NPU-0,Ascend910B3,65536,0:NPU-1,Ascend910B3,65536,0:;;",
		";NPU-0,Ascend910B3,10000,30:",
		";",
		"",
		"NPU-0,Ascend910B3,16384,0;",
		",Ascend910B3,1,1:;",
		"NPU-0,Ascend910B3,-1,0:;",
		"NPU-0,Ascend910B3,1,2147483648:;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := DecodeAssignments(value)
		if err != nil {
			if got != nil {
				t.Errorf("DecodeAssignments returned %v with the error %v", got, err)
			}
			if !strings.HasPrefix(err.Error(), "container ") && !strings.HasPrefix(err.Error(), "empty value") {
				t.Errorf("DecodeAssignments(%q) error %q does not name the container", value, err)
			}
			return
		}
		if want := strings.Count(strings.TrimSuffix(value, ";"), ";") + 1; len(got) != want {
			t.Fatalf("DecodeAssignments(%q) has %d containers, want %d", value, len(got), want)
		}
		for _, cards := range got {
			for _, c := range cards {
				if c.UUID == "" || c.Type == "" || c.MemMiB < 0 || c.Cores < 0 {
					t.Errorf("accepted card %+v", c)
				}
			}
		}
		enc := EncodeAssignments(got)
		if len(enc) > 2*len(value)+1 {
			t.Errorf("EncodeAssignments(DecodeAssignments(%d bytes)) is %d bytes", len(value), len(enc))
		}
		again, err := DecodeAssignments(enc)
		if err != nil {
			t.Fatalf("DecodeAssignments(%q), written back from %q: %v", enc, value, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Errorf("round trip of %q via %q (-decoded +re-decoded):\n%s", value, enc, diff)
		}
	})
}

// FuzzDecodeRuntimeInfo checks the reader of huawei.com/<commonWord>: a
// refusal says what is wanted, and an accepted list marshals back to JSON
// that decodes the same.
func FuzzDecodeRuntimeInfo(f *testing.F) {
	for _, s := range []string{
		`[{"UUID":"NPU-0","temp":"vir05_1c_16g"}]`,
		`[{"UUID":"NPU-0"},{"UUID":"NPU-1"}]`,
		`[{"UUID":"NPU-0","memory":10000,"core":30}]`,
		`[]`,
		`null`,
		``,
		`{"UUID":"NPU-0"}`,
		`[{"UUID":"NPU-0","memory":"1"}]`,
		`[{"UUID":"NPU-0","core":2147483648}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := DecodeRuntimeInfo(value)
		if err != nil {
			if got != nil || !strings.HasPrefix(err.Error(), "want a JSON list") {
				t.Errorf("DecodeRuntimeInfo(%q) = %v, %v", value, got, err)
			}
			return
		}
		raw, err := json.Marshal(got)
		if err != nil {
			t.Fatalf("marshal %v: %v", got, err)
		}
		again, err := DecodeRuntimeInfo(string(raw))
		if err != nil {
			t.Fatalf("DecodeRuntimeInfo(%s), written back from %q: %v", raw, value, err)
		}
		if diff := cmp.Diff(got, again, cmpEmptyRuntime); diff != "" {
			t.Errorf("round trip of %q via %s (-decoded +re-decoded):\n%s", value, raw, diff)
		}
	})
}

// cmpEmptyRuntime treats a nil and an empty list alike: "null" and "[]"
// both mean no entries.
var cmpEmptyRuntime = cmp.Comparer(func(a, b []RuntimeEntry) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return cmp.Equal(a, b)
})
