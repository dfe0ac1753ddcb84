package ascend

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

func int64p(v int64) *int64 { return &v }

// TestEncodeRegisterDecodes checks that what an agent encodes is what
// NewDevices decodes, NetworkID and health included.
func TestEncodeRegisterDecodes(t *testing.T) {
	cards := []ascendproto.RegisteredCard{
		{ID: "npu-0", Index: 0, Count: 4, DevmemMiB: 65536, Devcore: 20, Type: "Ascend910B3", Healthy: true, NetworkID: int64p(0)},
		{ID: "npu-1", Index: 1, Count: 4, DevmemMiB: 65536, Devcore: 20, Type: "Ascend910B3", Healthy: false, NetworkID: int64p(1)},
	}
	value, err := ascendproto.EncodeRegister(cards)
	if err != nil {
		t.Fatalf("ascendproto.EncodeRegister: %v", err)
	}
	b := newTestBackend(t, "Ascend910B3", false)
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{b.Keys().Register: value}}}
	d := devicesOf(t, b, node)
	got, _ := d.CardUsage()
	want := []device.CardUsage{
		{ID: "npu-0", Index: 0, Type: "Ascend910B3", Healthy: true, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
		{ID: "npu-1", Index: 1, Type: "Ascend910B3", Healthy: false, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded cards (-want +got):\n%s", diff)
	}
	if s := d.GetStatus(); !strings.Contains(s, "npu-1 Ascend910B3") || !strings.Contains(s, "network 1") {
		t.Errorf("GetStatus() = %q, want card npu-1 in network 1", s)
	}
}

// TestAssignmentsRoundTrip reads what Allocate writes, consumes the first
// container and encodes it back.
func TestAssignmentsRoundTrip(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	d := devicesOf(t, b, ascendNode("n1", "Ascend910B3", []card{npu("a", 65536), npu("b", 65536), npu("c", 65536)}))
	pod := npuPod("p", "Ascend910B3", []ctr{{1, 16384, -1}, {0, -1, -1}, {2, -1, -1}})
	r := testkit.Allocate(t, d, pod, "binpack")

	got, err := ascendproto.DecodeAssignments(r.Annotations[b.Keys().ToAllocate])
	if err != nil {
		t.Fatalf("ascendproto.DecodeAssignments(%q): %v", r.Annotations[b.Keys().ToAllocate], err)
	}
	if len(got) != 3 || len(got[0]) != 1 || len(got[1]) != 0 || len(got[2]) != 2 {
		t.Fatalf("ascendproto.DecodeAssignments = %+v, want 1, 0 and 2 cards", got)
	}
	if got[0][0].Type != "Ascend910B3" || got[0][0].MemMiB != 16384 || got[0][0].Cores != 0 {
		t.Errorf("container 0 card = %+v, want the 16384 MiB template of Ascend910B3", got[0][0])
	}
	if enc := ascendproto.EncodeAssignments(got); enc != r.Annotations[b.Keys().ToAllocate] {
		t.Errorf("ascendproto.EncodeAssignments = %q, want the original %q", enc, r.Annotations[b.Keys().ToAllocate])
	}
	got[0] = nil
	consumed := ascendproto.EncodeAssignments(got)
	if strings.HasPrefix(consumed, got[2][0].UUID) || !strings.HasPrefix(consumed, ";;") {
		t.Errorf("consumed value %q, want two empty containers first", consumed)
	}

	rt, err := ascendproto.DecodeRuntimeInfo(r.Annotations[b.Keys().RuntimeInfo])
	if err != nil {
		t.Fatalf("ascendproto.DecodeRuntimeInfo: %v", err)
	}
	want := []ascendproto.RuntimeEntry{{UUID: got[2][0].UUID}, {UUID: got[2][1].UUID}}
	if len(rt) != 3 || rt[0].Temp != "vir05_1c_16g" || rt[0].Memory != nil {
		t.Errorf("runtime info %+v, want the template vir05_1c_16g first", rt)
	}
	if diff := cmp.Diff(want, rt[1:]); diff != "" {
		t.Errorf("whole cards (-want +got):\n%s", diff)
	}
}

func TestRuntimeInfoSoft(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", true)
	d := devicesOf(t, b, ascendNode("n1", "Ascend910B3", []card{npu("a", 65536)}))
	r := testkit.Allocate(t, d, npuPod("p", "Ascend910B3", []ctr{{1, 4096, 30}}), "binpack")
	rt, err := ascendproto.DecodeRuntimeInfo(r.Annotations[b.Keys().RuntimeInfo])
	if err != nil {
		t.Fatalf("ascendproto.DecodeRuntimeInfo: %v", err)
	}
	core := int32(30)
	want := []ascendproto.RuntimeEntry{{UUID: "a", Memory: int64p(4096), Core: &core}}
	if diff := cmp.Diff(want, rt); diff != "" {
		t.Errorf("runtime info (-want +got):\n%s", diff)
	}
}
