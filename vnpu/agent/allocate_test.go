package agent

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// phyIDs maps the pod's cards of container ctr to the chips' physical IDs.
func (h *harness) phyIDs(pod *v1.Pod, ctr int) string {
	h.t.Helper()
	entries, err := ascendproto.DecodeAssignments(pod.Annotations[h.keys.Allocated])
	if err != nil {
		h.t.Fatal(err)
	}
	var ids []string
	for _, c := range entries[ctr] {
		chip, ok := h.inv.Chip(c.UUID)
		if !ok {
			h.t.Fatalf("the backend picked %s, not a chip of the node", c.UUID)
		}
		ids = append(ids, strconv.Itoa(chip.PhyID))
	}
	return strings.Join(ids, ",")
}

func TestRegisterAndListAndWatch(t *testing.T) {
	h := newHarness(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 2, SplitCount: 3, Unhealthy: []int{1}})
	if h.register.ResourceName != "huawei.com/Ascend910B3" || h.register.Endpoint != "Ascend910B3.sock" || h.register.Version != pluginapi.Version {
		t.Errorf("Register(%+v), want huawei.com/Ascend910B3 on Ascend910B3.sock", h.register)
	}
	chips := h.inv.Chips()
	var got []string
	for _, d := range h.devices {
		got = append(got, d.ID+" "+d.Health)
	}
	want := []string{
		chips[0].UUID + "-0 Healthy", chips[0].UUID + "-1 Healthy", chips[0].UUID + "-2 Healthy",
		chips[1].UUID + "-0 Unhealthy", chips[1].UUID + "-1 Unhealthy", chips[1].UUID + "-2 Unhealthy",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ListAndWatch devices (-want +got):\n%s", diff)
	}
}

func TestAllocateTemplateMode(t *testing.T) {
	h := newHarness(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 4})
	pod := h.schedule(h.npuPod("p", ctr{1, 16000, -1}, ctr{0, -1, -1}, ctr{2, -1, -1}), nil)

	first, err := h.allocate(h.ids(1)...)
	if err != nil {
		t.Fatalf("Allocate container 0: %v", err)
	}
	want := map[string]string{ascendproto.EnvVisibleDevices: h.phyIDs(pod, 0), ascendproto.EnvVNPUSpecs: "vir05_1c_16g"}
	if diff := cmp.Diff(want, first.Envs); diff != "" {
		t.Errorf("container 0 env (-want +got):\n%s", diff)
	}
	mid := h.pod("p")
	if mid.Annotations[ascendproto.AnnotationBindPhase] != ascendproto.BindPhaseAllocating {
		t.Errorf("bind-phase after container 0 = %q, want allocating", mid.Annotations[ascendproto.AnnotationBindPhase])
	}
	if v := mid.Annotations[h.keys.ToAllocate]; !strings.HasPrefix(v, ";;") || !strings.Contains(v, ",Ascend910B3,") {
		t.Errorf("devices-to-allocate after container 0 = %q, want container 0 consumed and container 2 left", v)
	}
	if _, held := h.node().Annotations[ascendproto.NodeLockName]; !held {
		t.Error("node lock released before the last container was served")
	}

	second, err := h.allocate(h.ids(2)...)
	if err != nil {
		t.Fatalf("Allocate container 2: %v", err)
	}
	want = map[string]string{ascendproto.EnvVisibleDevices: h.phyIDs(pod, 2)}
	if diff := cmp.Diff(want, second.Envs); diff != "" {
		t.Errorf("container 2 env, whole chips without a template (-want +got):\n%s", diff)
	}
	done := h.pod("p")
	if done.Annotations[ascendproto.AnnotationBindPhase] != ascendproto.BindPhaseSuccess {
		t.Errorf("bind-phase = %q, want success", done.Annotations[ascendproto.AnnotationBindPhase])
	}
	if strings.Contains(done.Annotations[h.keys.ToAllocate], "Ascend910B3") {
		t.Errorf("devices-to-allocate = %q, want every container consumed", done.Annotations[h.keys.ToAllocate])
	}
	if done.Annotations[h.keys.Allocated] != pod.Annotations[h.keys.Allocated] {
		t.Error("devices-allocated changed; the scheduler's accounting reads it")
	}
	if v, held := h.node().Annotations[ascendproto.NodeLockName]; held {
		t.Errorf("node lock %s=%q still held after the pod was served", ascendproto.NodeLockName, v)
	}

	// The pod is done: asking again finds nothing to serve.
	if _, err := h.allocate(h.ids(1)...); status.Code(err) != codes.NotFound {
		t.Errorf("Allocate after the pod was served: %v, want NotFound", err)
	}
}

func TestAllocateHAMiCoreMode(t *testing.T) {
	h := newHarness(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 2, HAMiCore: true})
	if got := h.node().Annotations[ascendproto.AnnotationNodeHAMiCore]; got != "true" {
		t.Fatalf("node annotation %s = %q, want true", ascendproto.AnnotationNodeHAMiCore, got)
	}
	pod := h.schedule(h.npuPod("p", ctr{1, 4096, 30}), nil)
	resp, err := h.allocate(h.ids(1)...)
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	phy := h.phyIDs(pod, 0)
	want := map[string]string{
		ascendproto.EnvVisibleDevices: phy,
		EnvMemQuota:                   "4096",
		EnvPriority:                   "30",
		EnvGlobalShm:                  "/hami-shared-region/" + phy + "_global_registry",
		EnvLocalShm:                   "/hami-vnpu-shmem/vnpu_local_shmem",
	}
	if diff := cmp.Diff(want, resp.Envs); diff != "" {
		t.Errorf("env (-want +got):\n%s", diff)
	}
	var mounts []string
	for _, m := range resp.Mounts {
		mounts = append(mounts, m.HostPath+":"+m.ContainerPath)
	}
	wantMounts := []string{
		DefaultHookDir + ":/hami-vnpu-core",
		DefaultHookDir + "/ld.so.preload:/etc/ld.so.preload",
		"/usr/local/hami-shared-region:/hami-shared-region",
		DefaultHookDir + "/containers/uid-p_c0:/hami-vnpu-shmem",
	}
	if diff := cmp.Diff(wantMounts, mounts); diff != "" {
		t.Errorf("mounts (-want +got):\n%s", diff)
	}
	if got := h.pod("p").Annotations[ascendproto.AnnotationBindPhase]; got != ascendproto.BindPhaseSuccess {
		t.Errorf("bind-phase = %q, want success", got)
	}
}

// TestAllocateRefusals checks that allocations this node cannot have been
// given are refused with the right gRPC code, and that the pod's
// allocation is marked failed (with the node lock released) when it was
// written for this node.
func TestAllocateRefusals(t *testing.T) {
	stale := strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)
	tests := []struct {
		name string
		edit func(h *harness, p *v1.Pod)
		// ids overrides the requested device IDs.
		ids        []string
		code       codes.Code
		msg        string
		wantPhase  string
		lockFreed  bool
		noPodAtAll bool
	}{
		{name: "bound to another node", edit: func(_ *harness, p *v1.Pod) { p.Spec.NodeName = "n2" },
			code: codes.PermissionDenied, msg: `bound to node "n2", not n1`, wantPhase: ascendproto.BindPhaseAllocating},
		{name: "written for another node", edit: func(_ *harness, p *v1.Pod) { p.Annotations[ascendproto.AnnotationAssignedNode] = "n2" },
			code: codes.PermissionDenied, msg: `hami.io/vgpu-node="n2" was not written for node n1`, wantPhase: ascendproto.BindPhaseFailed},
		{name: "chip the node does not have", edit: func(h *harness, p *v1.Pod) {
			p.Annotations[h.keys.ToAllocate] = "Ascend910B3-n9-0,Ascend910B3,65536,0:;"
		}, code: codes.PermissionDenied, msg: "node n1 has no such Ascend910B3 chip", wantPhase: ascendproto.BindPhaseFailed, lockFreed: true},
		{name: "runtime info missing", edit: func(h *harness, p *v1.Pod) { delete(p.Annotations, h.keys.RuntimeInfo) },
			code: codes.PermissionDenied, msg: "annotation huawei.com/Ascend910B3 missing", wantPhase: ascendproto.BindPhaseFailed, lockFreed: true},
		{name: "unknown template", edit: func(h *harness, p *v1.Pod) {
			p.Annotations[h.keys.RuntimeInfo] = strings.Replace(p.Annotations[h.keys.RuntimeInfo], "vir05_1c_16g", "vir99", 1)
		}, code: codes.PermissionDenied, msg: `template "vir99"`, wantPhase: ascendproto.BindPhaseFailed, lockFreed: true},
		{name: "stale", edit: func(_ *harness, p *v1.Pod) { p.Annotations[ascendproto.AnnotationBindTime] = stale },
			code: codes.FailedPrecondition, msg: "old, more than 5m0s", wantPhase: ascendproto.BindPhaseFailed, lockFreed: true},
		{name: "bind-phase not allocating", edit: func(_ *harness, p *v1.Pod) {
			p.Annotations[ascendproto.AnnotationBindPhase] = ascendproto.BindPhaseSuccess
		},
			code: codes.FailedPrecondition, msg: `hami.io/bind-phase="success", want allocating`, wantPhase: ascendproto.BindPhaseSuccess},
		{name: "count differs from the request", edit: func(h *harness, p *v1.Pod) {
			p.Spec.Containers[0].Resources.Limits[v1.ResourceName(h.inv.Entry().ResourceName)] = *resourceQuantity(2)
		}, code: codes.PermissionDenied, msg: "asks for 2 of huawei.com/Ascend910B3, the allocation has 1 chips", wantPhase: ascendproto.BindPhaseFailed, lockFreed: true},
		{name: "device never advertised", ids: []string{"GPU-0-0"}, code: codes.InvalidArgument, msg: `device "GPU-0-0" was not advertised`,
			wantPhase: ascendproto.BindPhaseAllocating},
		{name: "no pod", noPodAtAll: true, code: codes.NotFound, msg: "no pending Ascend910B3 pod matches a request for 1 devices"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 2})
			if !tc.noPodAtAll {
				h.schedule(h.npuPod("p", ctr{1, 16000, -1}), func(p *v1.Pod) {
					if tc.edit != nil {
						tc.edit(h, p)
					}
				})
			}
			ids := tc.ids
			if ids == nil {
				ids = h.ids(1)
			}
			resp, err := h.allocate(ids...)
			if status.Code(err) != tc.code || !strings.Contains(status.Convert(err).Message(), tc.msg) {
				t.Fatalf("Allocate = %v, %v; want %s containing %q", resp, err, tc.code, tc.msg)
			}
			if tc.noPodAtAll {
				return
			}
			p := h.pod("p")
			if got := p.Annotations[ascendproto.AnnotationBindPhase]; got != tc.wantPhase {
				t.Errorf("bind-phase = %q, want %q", got, tc.wantPhase)
			}
			if _, held := h.node().Annotations[ascendproto.NodeLockName]; held == tc.lockFreed {
				t.Errorf("node lock held = %v, want %v", held, !tc.lockFreed)
			}
		})
	}
}

// TestAllocatePicksTheMatchingPod serves two pods whose next containers
// ask for different numbers of chips, in the kubelet's order.
func TestAllocatePicksTheMatchingPod(t *testing.T) {
	h := newHarness(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 4})
	one := h.schedule(h.npuPod("one", ctr{1, -1, -1}), nil)
	two := h.schedule(h.npuPod("two", ctr{2, -1, -1}), nil)
	r2, err := h.allocate(h.ids(2)...)
	if err != nil {
		t.Fatalf("Allocate 2 chips: %v", err)
	}
	r1, err := h.allocate(h.ids(1)...)
	if err != nil {
		t.Fatalf("Allocate 1 chip: %v", err)
	}
	if got, want := r2.Envs[ascendproto.EnvVisibleDevices], h.phyIDs(two, 0); got != want {
		t.Errorf("two-chip request got %q, want pod two's %q", got, want)
	}
	if got, want := r1.Envs[ascendproto.EnvVisibleDevices], h.phyIDs(one, 0); got != want {
		t.Errorf("one-chip request got %q, want pod one's %q", got, want)
	}
}

func resourceQuantity(n int64) *resource.Quantity { return resource.NewQuantity(n, resource.DecimalSI) }
