package deviceshare

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/util"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

const numberArgs = `      deviceshare.GPUNumberEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10`

// firstCard returns the first card UUID of a vGPU allocation record.
func firstCard(annotations map[string]string) string {
	card, _, _ := strings.Cut(annotations[vgpuproto.AnnotationIDs], ",")
	return card
}

// TestVGPUPreemptionEvictsTheSharerOfTheUsableCard: the preemptor may use
// GPU-1 only. Volcano alone would evict the lowest-priority pod on the
// node, which shares GPU-0, and stop there because the node-level vGPU
// count says there is room. The plugin evicts the sharer of GPU-1, the
// preemptor is pipelined onto it, stays pipelined without further
// evictions while the victim terminates, and is bound once it is gone.
func TestVGPUPreemptionEvictsTheSharerOfTheUsableCard(t *testing.T) {
	pc := newPreemptCluster(t, preemptConf("enqueue, allocate, preempt", vgpuArgs),
		[]*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
	pc.place("low", "default", vgpuPod("lowest", "pg-lowest", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-0"))
	placed := pc.place("mid", "default", vgpuPod("sharer", "pg-sharer", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"))

	high := withPriority(vgpuPod("high", "pg-high", 1, 8000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"), prioHigh)
	pc.submit("pg-high", "default", "high", 1, high)
	ledgerBefore := nodesStatus(pc.st.nodes)
	var reserved map[string]string
	pc.session(func(ssn *framework.Session) { reserved = pipelinedAnnotations(pc, ssn, high) })
	if got := firstCard(reserved); got != "GPU-1" {
		t.Fatalf("preemptor reservation %v, want pipelined onto GPU-1", reserved)
	}
	if diff := cmp.Diff([]string{testNamespace + "/sharer"}, pc.evictions(1)); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(ledgerBefore, nodesStatus(pc.st.nodes)); diff != "" {
		t.Errorf("the session changed the ledger (-before +after):\n%s", diff)
	}

	// The victim is terminating (Releasing in the cache): the preemptor is
	// pipelined again onto its card and nobody else is evicted.
	reserved = nil
	pc.session(func(ssn *framework.Session) { reserved = pipelinedAnnotations(pc, ssn, high) })
	if got := firstCard(reserved); got != "GPU-1" {
		t.Errorf("while the victim terminates, reservation %v, want pipelined onto GPU-1", reserved)
	}
	if diff := cmp.Diff([]string{testNamespace + "/sharer"}, pc.evictions(1)); diff != "" {
		t.Errorf("evicted while the victim terminates (-want +got):\n%s", diff)
	}
	pc.expectNoBind()

	pc.cache.DeletePod(placed[0])
	pc.session(nil)
	binds := pc.waitBinds(1)
	if got := vgpuCards(binds)["high"]; got != "n1/GPU-1" {
		t.Errorf("preemptor bound to %q, want n1/GPU-1", got)
	}
}

// TestPreemptionDoesNotEvictWhenItCannotHelp: when no eviction could make
// the cards fit, the plugin says UnschedulableAndUnresolvable, Volcano
// skips the node, and the lower-priority sharer of GPU-0 stays.
func TestPreemptionDoesNotEvictWhenItCannotHelp(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		reasons []string
	}{
		{name: "no card of the type", reasons: []string{vgpu.ReasonTypeMismatch},
			pod: vgpuPod("p", "pg-p", 1, 1000, 10, vgpuproto.AnnotationUseType, "A100")},
		{name: "more memory than a card has", reasons: []string{vgpu.ReasonCardTooSmall},
			pod: vgpuPod("p", "pg-p", 1, 20000, 10)},
		{name: "more cards than the node has", reasons: []string{vgpu.ReasonTooFewCards},
			pod: vgpuPod("p", "pg-p", 3, 1000, 10)},
		{name: "UUID selector names no card here", reasons: []string{vgpu.ReasonUUIDExcluded},
			pod: vgpuPod("p", "pg-p", 1, 1000, 10, vgpuproto.AnnotationUseUUID, "GPU-9")},
		{name: "only a higher-priority pod holds the usable card",
			reasons: []string{vgpu.ReasonInsufficientMem, ReasonEvictionWouldNotHelp},
			pod:     vgpuPod("p", "pg-p", 1, 8000, 10, vgpuproto.AnnotationUseUUID, "GPU-1")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc := newPreemptCluster(t, preemptConf("enqueue, allocate, preempt", vgpuArgs),
				[]*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
			pc.place("low", "default", vgpuPod("low", "pg-low", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-0"))
			pc.place("high", "default", vgpuPod("top", "pg-top", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"))

			pc.submit("pg-p", "default", "mid", 1, withPriority(tc.pod, prioMid))
			var msg string
			var unresolvable bool
			pc.session(func(ssn *framework.Session) {
				msg, unresolvable = fitMessage(ssn, tc.pod), unresolvableOn(ssn, tc.pod, "n1")
			})
			if got := pc.evictions(0); len(got) != 0 {
				t.Errorf("evicted %v, want nothing", got)
			}
			pc.expectNoBind()
			if !unresolvable {
				t.Errorf("the node's status is resolvable; want UnschedulableAndUnresolvable (message %q)", msg)
			}
			if !containsAll(msg, tc.reasons...) {
				t.Errorf("fit message %q does not name %q", msg, tc.reasons)
			}
		})
	}
}

// TestDiscardedPreemptionLeavesTheLedgerUnchanged: a gang of two can have
// only one member pipelined after evicting the only victim, so Volcano
// discards the statement. Nothing is evicted, the session view is back to
// what it was, and the ledger never changed.
func TestDiscardedPreemptionLeavesTheLedgerUnchanged(t *testing.T) {
	pc := newPreemptCluster(t, preemptConf("enqueue, allocate, preempt", vgpuArgs),
		[]*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000})}, nil)
	pc.place("low", "default", vgpuPod("low", "pg-low", 1, 12000, 10))
	a := withPriority(vgpuPod("a", "pg-gang", 1, 12000, 10), prioHigh)
	b := withPriority(vgpuPod("b", "pg-gang", 1, 12000, 10), prioHigh)
	pc.submit("pg-gang", "default", "high", 2, a, b)

	before := nodesStatus(pc.st.nodes)
	var during map[string]string
	var allocs, evicted int
	pc.session(func(*framework.Session) {
		during = pc.sessionStatus()
		allocs, evicted = len(pc.last.sess.allocs), len(pc.last.sess.evicted)
	})
	if got := pc.evictions(0); len(got) != 0 {
		t.Errorf("evicted %v, want nothing (the statement was discarded)", got)
	}
	pc.expectNoBind()
	if diff := cmp.Diff(before, during); diff != "" {
		t.Errorf("session view after the discard differs from the ledger before (-before +after):\n%s", diff)
	}
	if diff := cmp.Diff(before, nodesStatus(pc.st.nodes)); diff != "" {
		t.Errorf("ledger changed (-before +after):\n%s", diff)
	}
	if allocs != 0 || evicted != 0 {
		t.Errorf("session still holds %d allocations and %d evictions after the discard", allocs, evicted)
	}
}

// TestGPUSharePreemptionPrefersFewestVictims: card 0 holds one pod, card 1
// two, all of the same priority; the preemptor needs either card empty.
// Volcano's own victim order (equal priorities: by job, pg-b2 first) would
// evict a pod of card 1 and stop, as the node-level memory sum then
// suffices though no card does; the plugin evicts the single pod of card 0.
func TestGPUSharePreemptionPrefersFewestVictims(t *testing.T) {
	pc := newPreemptCluster(t, preemptConf("enqueue, allocate, preempt", shareArgs),
		[]*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	solo := gpuMemPod("a0", "pg-a0", 6000)
	b1 := gpuMemPod("b1", "pg-b1", 3000)
	b2 := gpuMemPod("b2", "pg-b2", 3000)
	for i, p := range []*v1.Pod{solo, b1, b2} {
		p.CreationTimestamp = metav1.NewTime(testTime.Add(time.Duration(i) * time.Minute))
	}
	pc.place("low", "default", solo)
	pc.place("low", "default", b1)
	pc.place("low", "default", b2)
	if got := cardUse(pc.bound()); got["n1/0"] != 1 || got["n1/1"] != 2 {
		t.Fatalf("set-up placed %v, want a0 on card 0, b1 and b2 on card 1", got)
	}

	high := withPriority(gpuMemPod("high", "pg-high", 6000), prioHigh)
	pc.submit("pg-high", "default", "high", 1, high)
	var reserved map[string]string
	pc.session(func(ssn *framework.Session) { reserved = pipelinedAnnotations(pc, ssn, high) })
	if diff := cmp.Diff([]string{testNamespace + "/a0"}, pc.evictions(1)); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if got := reserved[gpushareproto.AnnotationGPUIndex]; got != "0" {
		t.Errorf("preemptor reserved gpu-index %q, want card 0", got)
	}
}

// TestGPUNumberPreemption: whole cards. A mid-priority pod asking for one
// card evicts the low-priority holder; one asking for two cannot get the
// high-priority pod's card, so nothing is evicted.
func TestGPUNumberPreemption(t *testing.T) {
	tests := []struct {
		name        string
		cards       int64
		wantEvicted []string
		wantIndex   string
	}{
		{name: "one card", cards: 1, wantEvicted: []string{testNamespace + "/low"}, wantIndex: "0"},
		{name: "two cards", cards: 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pc := newPreemptCluster(t, preemptConf("enqueue, allocate, preempt", numberArgs),
				[]*v1.Node{gpuNode("n1", 2, 8000)}, nil)
			pc.place("low", "default", gpuNumPod("low", "pg-low", 1))
			pc.place("high", "default", gpuNumPod("top", "pg-top", 1))
			p := withPriority(gpuNumPod("p", "pg-p", tc.cards), prioMid)
			pc.submit("pg-p", "default", "mid", 1, p)
			var reserved map[string]string
			var unresolvable bool
			pc.session(func(ssn *framework.Session) {
				reserved, unresolvable = pipelinedAnnotations(pc, ssn, p), unresolvableOn(ssn, p, "n1")
			})
			got := pc.evictions(len(tc.wantEvicted))
			if diff := cmp.Diff(tc.wantEvicted, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("evicted (-want +got):\n%s", diff)
			}
			if idx := reserved[gpushareproto.AnnotationGPUIndex]; idx != tc.wantIndex {
				t.Errorf("reserved gpu-index %q, want %q", idx, tc.wantIndex)
			}
			if tc.wantIndex == "" && !unresolvable {
				t.Error("the node's status is resolvable; want UnschedulableAndUnresolvable")
			}
		})
	}
}

// TestReclaimEvictsTheRightCardOfAnotherQueue: Volcano's reclaim action
// takes back capacity from another queue; the plugin's ReclaimableFn keeps
// only the pod sharing the card the reclaimer may use, though Volcano's own
// order (lowest job priority first) would start with the other one.
func TestReclaimEvictsTheRightCardOfAnotherQueue(t *testing.T) {
	queues := []*schedulingv1beta1.Queue{util.BuildQueue("q1", 1, nil), util.BuildQueue("q2", 1, nil)}
	pc := newPreemptCluster(t, preemptConf("enqueue, allocate, reclaim", vgpuArgs),
		[]*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, queues)
	pc.place("low", "q2", vgpuPod("r0", "pg-r0", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-0"))
	pc.place("mid", "q2", vgpuPod("r1", "pg-r1", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"))

	p := withPriority(vgpuPod("p", "pg-p", 1, 8000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"), prioLow)
	pc.submit("pg-p", "q1", "low", 1, p)
	var reserved map[string]string
	pc.session(func(ssn *framework.Session) { reserved = pipelinedAnnotations(pc, ssn, p) })
	if diff := cmp.Diff([]string{testNamespace + "/r1"}, pc.evictions(1)); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if got := firstCard(reserved); got != "GPU-1" {
		t.Errorf("reclaimer reservation %v, want pipelined onto GPU-1", reserved)
	}
}

// TestReclaimRespectsDeservedDeviceShares: queues set deserved vGPU memory,
// which Volcano's queue plugins cannot see. q2 runs 24000 MiB; the q1 pod
// that needs GPU-1 reclaims r1 when q2 deserves 16000, and nothing when q2
// deserves 32000 (the node is then unresolvable for it).
func TestReclaimRespectsDeservedDeviceShares(t *testing.T) {
	tests := []struct {
		name        string
		q2Deserved  string
		wantEvicted []string
	}{
		{name: "q2 above its deserved share", q2Deserved: "16000", wantEvicted: []string{testNamespace + "/r1"}},
		{name: "q2 within its deserved share", q2Deserved: "32000"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			deserved := func(v string) v1.ResourceList {
				return v1.ResourceList{"volcano.sh/vgpu-memory": resource.MustParse(v)}
			}
			queues := []*schedulingv1beta1.Queue{
				util.BuildQueueWithResourcesQuantity("q1", deserved("16000"), nil),
				util.BuildQueueWithResourcesQuantity("q2", deserved(tc.q2Deserved), nil),
			}
			pc := newPreemptCluster(t, preemptConf("enqueue, allocate, reclaim", vgpuArgs),
				[]*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, queues)
			pc.place("low", "q2", vgpuPod("r0", "pg-r0", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-0"))
			pc.place("low", "q2", vgpuPod("r1", "pg-r1", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"))
			p := vgpuPod("p", "pg-p", 1, 8000, 10, vgpuproto.AnnotationUseUUID, "GPU-1")
			pc.submit("pg-p", "q1", "low", 1, p)
			var unresolvable bool
			pc.session(func(ssn *framework.Session) { unresolvable = unresolvableOn(ssn, p, "n1") })
			if diff := cmp.Diff(tc.wantEvicted, pc.evictions(len(tc.wantEvicted)), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("evicted (-want +got):\n%s", diff)
			}
			if want := len(tc.wantEvicted) == 0; unresolvable != want {
				t.Errorf("node unresolvable for the reclaimer = %v, want %v", unresolvable, want)
			}
		})
	}
}

// TestPipelinedPreemptorHoldsItsReservation: two preemptors need GPU-1. The
// first evicts its sharer and is pipelined onto it; the second, in the same
// session, may not take the capacity the first reserved, and no further
// pod is evicted for it (the lower-priority pod left shares GPU-0, which it
// cannot use).
func TestPipelinedPreemptorHoldsItsReservation(t *testing.T) {
	pc := newPreemptCluster(t, preemptConf("enqueue, allocate, preempt", vgpuArgs),
		[]*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
	pc.place("low", "default", vgpuPod("lowest", "pg-lowest", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-0"))
	pc.place("mid", "default", vgpuPod("sharer", "pg-sharer", 1, 12000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"))
	first := withPriority(vgpuPod("first", "pg-first", 1, 8000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"), prioHigh)
	second := withPriority(vgpuPod("second", "pg-second", 1, 10000, 10, vgpuproto.AnnotationUseUUID, "GPU-1"), prioHigh)
	pc.submit("pg-first", "default", "high", 1, first)
	pc.submit("pg-second", "default", "high", 1, second)
	var firstRes, secondRes map[string]string
	var view map[string]string
	pc.session(func(ssn *framework.Session) {
		firstRes, secondRes = pipelinedAnnotations(pc, ssn, first), pipelinedAnnotations(pc, ssn, second)
		view = pc.sessionStatus()
	})
	if diff := cmp.Diff([]string{testNamespace + "/sharer"}, pc.evictions(1)); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if firstCard(firstRes) != "GPU-1" || secondRes != nil {
		t.Errorf("reservations: first %v, second %v; want first on GPU-1 and second not pipelined", firstRes, secondRes)
	}
	if got := view["n1/hamivgpu"]; !strings.Contains(got, "GPU-1 NVIDIA-Tesla V100-PCIE-32GB hami-core numa 0: 8000/16000 MiB") {
		t.Errorf("session view %q: GPU-1 should hold only the first preemptor's 8000 MiB", got)
	}
}
