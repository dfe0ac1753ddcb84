package ascend

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

func TestAllocateWritesTheProtocol(t *testing.T) {
	const now = "1700000000"
	keys := ascendproto.KeysFor("Ascend910B3")
	tests := []struct {
		name   string
		node   []string
		pod    *v1.Pod
		policy string
		want   map[string]string
	}{
		{
			name:   "memory rounds up to the smallest template",
			pod:    npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 10000, cores: -1}}),
			policy: device.PolicyBinpack,
			want: map[string]string{
				keys.ToAllocate: "NPU-0,Ascend910B3,16384,0:;", keys.Allocated: "NPU-0,Ascend910B3,16384,0:;",
				keys.RuntimeInfo: `[{"UUID":"NPU-0","temp":"vir05_1c_16g"}]`,
			},
		},
		{
			name:   "memory above every template takes the whole card, without a template name",
			pod:    npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 40000, cores: -1}}),
			policy: device.PolicyBinpack,
			want: map[string]string{
				keys.ToAllocate: "NPU-0,Ascend910B3,65536,0:;", keys.Allocated: "NPU-0,Ascend910B3,65536,0:;",
				keys.RuntimeInfo: `[{"UUID":"NPU-0"}]`,
			},
		},
		{
			name:   "two whole cards and a container without NPUs keep container positions",
			pod:    withPlainContainer(npuPod("p", "Ascend910B3", []ctr{{n: 2, mem: -1, cores: -1}})),
			policy: device.PolicySpread,
			want: map[string]string{
				keys.ToAllocate:  "NPU-0,Ascend910B3,65536,0:NPU-1,Ascend910B3,65536,0:;;",
				keys.Allocated:   "NPU-0,Ascend910B3,65536,0:NPU-1,Ascend910B3,65536,0:;;",
				keys.RuntimeInfo: `[{"UUID":"NPU-0"},{"UUID":"NPU-1"}]`,
			},
		},
		{
			name:   "hami-core records memory and cores",
			node:   []string{ascendproto.AnnotationNodeHAMiCore, "true"},
			pod:    npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 10000, cores: 30}}, ascendproto.AnnotationVNPUMode, ascendproto.ModeHAMiCore),
			policy: device.PolicyBinpack,
			want: map[string]string{
				keys.ToAllocate: "NPU-0,Ascend910B3,10000,30:;", keys.Allocated: "NPU-0,Ascend910B3,10000,30:;",
				keys.RuntimeInfo: `[{"UUID":"NPU-0","memory":10000,"core":30}]`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBackend(t, "Ascend910B3", false)
			d := devicesOf(t, b, ascendNode("node-1", "Ascend910B3", []card{npu("NPU-0", 65536), npu("NPU-1", 65536)}, tc.node...))
			r := testkit.Allocate(t, d, tc.pod, tc.policy)
			want := map[string]string{ascendproto.AnnotationAssignedNode: "node-1", ascendproto.AnnotationAssignedTime: now, ascendproto.AnnotationBindTime: now,
				ascendproto.AnnotationPredicate: now, ascendproto.AnnotationBindPhase: ascendproto.BindPhaseAllocating}
			for k, v := range tc.want {
				want[k] = v
			}
			if diff := cmp.Diff(want, r.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
		})
	}
}

func withPlainContainer(p *v1.Pod) *v1.Pod {
	p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "sidecar"})
	return p
}

func TestTemplatesShareACardWithinItsAICores(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	d := devicesOf(t, b, ascendNode("n", "Ascend910B3", []card{npu("NPU-0", 65536)}))
	// vir10_3c_32g takes 10 of 20 AI cores, 3 of 7 AI CPUs and 32 GiB: two
	// fill the card.
	for i, name := range []string{"a", "b"} {
		p := npuPod(name, "Ascend910B3", []ctr{{n: 1, mem: 32768, cores: -1}})
		if st := d.FilterNode(p, device.PolicyBinpack); !st.IsSuccess() {
			t.Fatalf("pod %d: FilterNode = %s", i, st.Message())
		}
		testkit.Allocate(t, d, p, device.PolicyBinpack)
	}
	st := d.FilterNode(npuPod("c", "Ascend910B3", []ctr{{n: 1, mem: 1000, cores: -1}}), device.PolicyBinpack)
	if st.IsSuccess() || st.Code != device.Unschedulable {
		t.Fatalf("third template on a full card: status %+v, want Unschedulable", st)
	}
	cards, pods := d.CardUsage()
	want := []device.CardUsage{{ID: "NPU-0", Type: "Ascend910B3", Healthy: true, MemoryUsedMiB: 65536, MemoryTotalMiB: 65536,
		CoresUsed: 20, CoresTotal: 20, Pods: 2, MaxPods: 7}}
	if diff := cmp.Diff(want, cards); diff != "" || pods != 2 {
		t.Errorf("CardUsage (-want +got):\n%s pods %d", diff, pods)
	}
}

func TestAICPUsLimitTemplates(t *testing.T) {
	// A chip of 40 AI cores but 4 AI CPUs: one 3-CPU template fits, a second
	// does not although memory and AI cores are plentiful.
	b, err := New(Options{Chip: config.VNPUConfig{ChipName: "X1", CommonWord: "AscendX1", ResourceName: "huawei.com/AscendX1",
		ResourceMemoryName: "huawei.com/AscendX1-memory", MemoryCapacity: 200000, MemoryAllocatable: 200000, AICore: 40, AICPU: 4,
		Templates: []config.VNPUTemplate{{Name: "vir10_3c_1g", Memory: 1024, AICore: 10, AICPU: 3}}}})
	if err != nil {
		t.Fatal(err)
	}
	d := devicesOf(t, b, ascendNode("n", "AscendX1", []card{npu("X-0", 200000).withType("AscendX1")}))
	testkit.Allocate(t, d, npuPod("a", "AscendX1", []ctr{{n: 1, mem: 1000, cores: -1}}), device.PolicyBinpack)
	st := d.FilterNode(npuPod("b", "AscendX1", []ctr{{n: 1, mem: 1000, cores: -1}}), device.PolicyBinpack)
	if st.IsSuccess() || st.Message() != ReasonSlicing {
		t.Fatalf("status %+v, want %q", st, ReasonSlicing)
	}
}

func TestReleaseAndSubResourceRestore(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	d := devicesOf(t, b, ascendNode("n", "Ascend910B3", []card{npu("NPU-0", 65536)}))
	before := d.GetStatus()
	p := npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 100, cores: -1}})
	r := testkit.Allocate(t, d, p, device.PolicyBinpack)
	if _, err := d.Allocate(p, device.PolicyBinpack); err == nil {
		t.Error("a second Allocate of the same pod succeeded")
	}
	if err := d.Release(p, r); err != nil {
		t.Fatal(err)
	}
	if got := d.GetStatus(); got != before {
		t.Errorf("after Release %q, want %q", got, before)
	}
	if err := d.Release(p, r); err == nil {
		t.Error("Release of a pod holding nothing succeeded")
	}
	if err := d.AddResource(device.ApplyReservation(p, r)); err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"huawei.com/Ascend910B3": 1, "huawei.com/Ascend910B3-memory": 16384, "huawei.com/Ascend910B3-core": 0}
	if diff := cmp.Diff(want, d.AddQueueResource(p)); diff != "" {
		t.Errorf("AddQueueResource (-want +got):\n%s", diff)
	}
	if err := d.SubResource(p); err != nil || d.GetStatus() != before {
		t.Errorf("SubResource: %v, state %q", err, d.GetStatus())
	}
}

func TestAdvertisedAndIgnored(t *testing.T) {
	b := newTestBackend(t, "Ascend910B3", false)
	d := devicesOf(t, b, ascendNode("n", "Ascend910B3", []card{npu("NPU-0", 65536), npu("NPU-1", 32768)}))
	want := v1.ResourceList{
		"huawei.com/Ascend910B3-memory": *resource.NewQuantity(98304, resource.DecimalSI),
		"huawei.com/Ascend910B3-core":   *resource.NewQuantity(200, resource.DecimalSI),
	}
	if diff := cmp.Diff(want, d.Advertised()); diff != "" {
		t.Errorf("Advertised (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"huawei.com/Ascend910B3-memory", "huawei.com/Ascend910B3-core"}, d.GetIgnoredDevices()); diff != "" {
		t.Errorf("GetIgnoredDevices (-want +got):\n%s", diff)
	}
	if b.LockName() != "hami.io/mutex.lock" || b.Name() != "Ascend910B3" {
		t.Errorf("LockName %q Name %q", b.LockName(), b.Name())
	}
}
