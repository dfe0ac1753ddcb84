package vgpu

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// hamiRegister is a HAMi plugin's JSON registration of two 16 GiB cards, as
// MarshalNodeDevices writes it (omitempty: index 0 and numa 0 left out).
const hamiRegister = `[{"id":"GPU-h0","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla T4","mode":"hami-core","health":true},` +
	`{"id":"GPU-h1","index":1,"count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla T4","mode":"hami-core","health":true}]`

func hamiNode(annotations ...string) *v1.Node {
	return testkit.Node("node-a", append([]string{vgpuproto.AnnotationHAMiRegister, hamiRegister}, annotations...)...)
}

func TestAllocateOnHAMiNodeWritesHAMiAllocation(t *testing.T) {
	now := strconv.Itoa(testUnix)
	tests := []struct {
		name           string
		pod            *v1.Pod
		initContainers int
		ids, hami      string
	}{{
		name: "one container",
		pod:  one("p", 1, 3000, 30),
		ids:  "GPU-h0,NVIDIA,3000,30:", hami: "GPU-h0,NVIDIA,3000,30:;",
	}, {
		name: "two containers, the first without cards",
		pod:  vpod("p", []ctr{{-1, -1, -1, -1}, {2, 1000, -1, 10}}),
		ids:  ";GPU-h0,NVIDIA,1000,10:GPU-h1,NVIDIA,1000,10:", hami: ";GPU-h0,NVIDIA,1000,10:GPU-h1,NVIDIA,1000,10:;",
	}, {
		// HAMi v2.9 indexes entries init containers first; older plugins
		// skip empty entries, so the two leading ones are harmless there.
		name: "init containers come first", initContainers: 2,
		pod: one("p", 1, 3000, 30),
		ids: "GPU-h0,NVIDIA,3000,30:", hami: ";;GPU-h0,NVIDIA,3000,30:;",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for i := 0; i < tc.initContainers; i++ {
				tc.pod.Spec.InitContainers = append(tc.pod.Spec.InitContainers, v1.Container{Name: "init" + strconv.Itoa(i)})
			}
			d := devicesOf(t, newBackend(t), hamiNode())
			r, err := d.Allocate(tc.pod, device.PolicyBinpack)
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]string{
				vgpuproto.AnnotationIDs: tc.ids, vgpuproto.AnnotationNode: "node-a",
				vgpuproto.AnnotationTime: now, vgpuproto.AnnotationBindTime: now,
				vgpuproto.AnnotationHAMiToAllocate: tc.hami, vgpuproto.AnnotationHAMiAllocated: tc.hami,
				vgpuproto.AnnotationHAMiNode: "node-a", vgpuproto.AnnotationHAMiTime: now,
				vgpuproto.AnnotationHAMiBindPhase: "allocating", vgpuproto.AnnotationHAMiBindTime: now,
			}
			if diff := cmp.Diff(want, r.Annotations); diff != "" {
				t.Errorf("annotations (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff([]string{vgpuproto.HAMiNodeLock}, r.NodeLocks); diff != "" {
				t.Errorf("node locks (-want +got):\n%s", diff)
			}
			// What Allocate wrote is what a new scheduler reads back.
			a := testkit.Account(t, devicesOf(t, newBackend(t), hamiNode()), device.ApplyReservation(tc.pod, r), vgpuproto.AnnotationIDs)
			if a == nil {
				t.Fatal("the allocation Allocate wrote is refused by AddResource")
			}
			a.CheckRoundTrip(t)
		})
	}
}

func TestAllocateOnVolcanoNodeIsUnchanged(t *testing.T) {
	// A node with both registrations is read as volcano.sh (its agent is
	// ours or Volcano's): no hami.io key, no lock.
	for _, node := range []*v1.Node{fourCards(), fourCards(vgpuproto.AnnotationHAMiRegister, hamiRegister)} {
		r, err := devicesOf(t, newBackend(t), node).Allocate(one("p", 1, 1000, 10), device.PolicyBinpack)
		if err != nil {
			t.Fatal(err)
		}
		for k := range r.Annotations {
			if strings.HasPrefix(k, "hami.io/") {
				t.Errorf("annotation %s written for a volcano.sh-registered node", k)
			}
		}
		if r.NodeLocks != nil || r.Annotations[vgpuproto.AnnotationToAllocate] == "" || r.Annotations[vgpuproto.AnnotationBindPhase] != "allocating" {
			t.Errorf("reservation %+v, want volcano.sh/devices-to-allocate, bind-phase allocating and no node lock", r)
		}
	}
}

// hamiPlaced is a pod HAMi's scheduler placed on node-a: HAMi's resource
// names (none of ours) and only hami.io/vgpu-devices-allocated.
func hamiPlaced(name, allocated string, initContainers int) *v1.Pod {
	p := testkit.Pod(name, []v1.ResourceList{testkit.Limits(map[v1.ResourceName]int64{"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4000})},
		vgpuproto.AnnotationHAMiAllocated, allocated, vgpuproto.AnnotationHAMiNode, "node-a", vgpuproto.AnnotationHAMiBindPhase, "success")
	p.Spec.NodeName = "node-a"
	for i := 0; i < initContainers; i++ {
		p.Spec.InitContainers = append(p.Spec.InitContainers, v1.Container{Name: "init" + strconv.Itoa(i)})
	}
	return p
}

func TestPodsPlacedByHAMiAreCounted(t *testing.T) {
	b := newBackend(t)
	tests := []struct {
		name           string
		value          string
		initContainers int
		want           string // GetStatus of card 0
	}{
		{name: "HAMi v2.8 layout", value: "GPU-h0,NVIDIA,4000,30:;", want: "4000/16384 MiB, cores 30/100, pods 1/10"},
		{name: "HAMi v2.9 layout with an init container", value: ";GPU-h0,NVIDIA,4000,30:;", initContainers: 1,
			want: "4000/16384 MiB, cores 30/100, pods 1/10"},
		{name: "other vendors' devices are not ours", value: "MLU-0,MLU,100,0:GPU-h0,NVIDIA,4000,0:;",
			want: "4000/16384 MiB, cores 0/100, pods 1/10"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := hamiPlaced("h", tc.value, tc.initContainers)
			if !b.HasDeviceRequest(p) {
				t.Fatal("HasDeviceRequest is false for a pod HAMi placed: the ledger would skip it")
			}
			d := devicesOf(t, b, hamiNode(), p)
			if got := d.GetStatus(); !strings.Contains(got, "GPU-h0 NVIDIA-Tesla T4 hami-core numa 0: "+tc.want) {
				t.Errorf("status %q, want card 0 at %q", got, tc.want)
			}
			if err := d.SubResource(p); err != nil || strings.Contains(d.GetStatus(), "pods 1/") {
				t.Errorf("SubResource: %v, status %q", err, d.GetStatus())
			}
		})
	}
}

func TestPodsPlacedByHAMiRefusals(t *testing.T) {
	b := newBackend(t)
	pending := hamiPlaced("pending", "GPU-h0,NVIDIA,4000,30:;", 0)
	pending.Spec.NodeName = ""
	if b.HasDeviceRequest(pending) {
		t.Error("a pending pod with HAMi's record but no request of ours is taken as asking for vGPUs")
	}
	tests := []struct{ name, value, want string }{
		{name: "unknown card", value: "GPU-zz,NVIDIA,1,1:;", want: `card "GPU-zz" is not registered`},
		{name: "malformed", value: "GPU-h0,NVIDIA,lots,1:;", want: `memory "lots"`},
		{name: "more entries than containers", value: "GPU-h0,NVIDIA,1,1:;;;", want: "3 container entries for a pod with 1 containers"},
		{name: "no NVIDIA card", value: "MLU-0,MLU,100,0:;", want: "no card recorded"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, b, hamiNode())
			err := d.AddResource(hamiPlaced("h", tc.value, 0))
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), vgpuproto.AnnotationHAMiAllocated) {
				t.Errorf("AddResource = %v, want an error naming %s and containing %q", err, vgpuproto.AnnotationHAMiAllocated, tc.want)
			}
		})
	}
}

func TestAgentPendingFollowsTheNodesAgent(t *testing.T) {
	b := newBackend(t)
	tests := []struct {
		name        string
		annotations []string
		want        bool
	}{
		{name: "volcano allocating", annotations: []string{vgpuproto.AnnotationBindPhase, "allocating"}, want: true},
		{name: "volcano success", annotations: []string{vgpuproto.AnnotationBindPhase, "success"}},
		{name: "HAMi allocating", annotations: []string{vgpuproto.AnnotationHAMiBindPhase, "allocating"}, want: true},
		// HAMi's plugin moves only hami.io/bind-phase; a stale
		// volcano.sh one must not hold the node's next pod back.
		{name: "HAMi success", annotations: []string{vgpuproto.AnnotationHAMiBindPhase, "success", vgpuproto.AnnotationBindPhase, "allocating"}},
		{name: "HAMi failed", annotations: []string{vgpuproto.AnnotationHAMiBindPhase, "failed"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := b.AgentPending(one("p", 1, 1, 0, tc.annotations...)); got != tc.want {
				t.Errorf("AgentPending = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestHAMiMIGCardsAreNotScheduled(t *testing.T) {
	reg := `[{"id":"GPU-m","count":7,"devmem":40960,"devcore":100,"type":"NVIDIA-A100-SXM4-40GB","mode":"mig","health":true}]`
	d := devicesOf(t, newBackend(t), testkit.Node("node-a", vgpuproto.AnnotationHAMiRegister, reg))
	st := d.FilterNode(one("p", 1, 1000, 0, vgpuproto.AnnotationMode, vgpuproto.ModeMIG), device.PolicyBinpack)
	if st == nil || st.Code == device.Success || !strings.Contains(st.Message(), ReasonUnhealthy) {
		t.Errorf("FilterNode = %v, want the HAMi MIG card refused", st)
	}
}
