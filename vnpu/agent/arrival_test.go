package agent

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/nodeagent/allocation/allocationtest"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// The tests here are the vGPU agent's (vgpu-device-plugin/allocate,
// journal_test.go) on the Ascend agent: the same protocol shape, the same
// kubelet behaviour (its Allocate names devices, not pods, and may come
// before the agent's informer shows the pod, or after the pod it was for
// was deleted and the scheduler bound the node's next pod).

func (h *harness) waitInformer(what string, ok func(cache.Indexer) bool) {
	h.t.Helper()
	waitUntil(h.t, "the informer showing "+what, func() bool { return ok(h.informer.GetIndexer()) })
}

var (
	waitUntil = allocationtest.WaitUntil
	has       = allocationtest.Has
)

func (h *harness) deletePod(name string) {
	h.t.Helper()
	if err := h.client.CoreV1().Pods("ns").Delete(h.ctx, name, metav1.DeleteOptions{}); err != nil {
		h.t.Fatal(err)
	}
}

// The kubelet asks before the agent's informer has the pod: the journal
// vouches for what was pending, the agent waits for the informer and
// serves the pod without listing the node's pods from the API server.
func TestAllocateServesALatePodWithoutListing(t *testing.T) {
	h := newHarness(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 2})
	done := make(chan error, 1)
	go func() { _, err := h.allocate(h.ids(1)...); done <- err }()
	waitUntil(t, "the request to arrive", func() bool { return len(h.pendingSources()) == 1 })
	late := h.schedule(h.npuPod("late", ctr{1, 16000, -1}), nil)
	if err := <-done; err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if got := h.pod(late.Name).Annotations[ascendproto.AnnotationBindPhase]; got != ascendproto.BindPhaseSuccess {
		t.Errorf("late's bind-phase = %q, want %q", got, ascendproto.BindPhaseSuccess)
	}
	if n := h.lists.Load(); n != 0 {
		t.Errorf("LivePods called %d times, want 0", n)
	}
	if got, want := h.pendingSources(), []string{allocation.PendingFromJournal}; !cmp.Equal(got, want) {
		t.Errorf("pending sources %v, want %v", got, want)
	}
}

// gatedLookup holds the Pending lookups after the first at the gate
// (allocationtest.Gate).
type gatedLookup struct {
	PodLookup
	gate *allocationtest.Gate
}

func (g gatedLookup) Pending() ([]*v1.Pod, error) {
	g.gate.Pass()
	return g.PodLookup.Pending()
}

// newGatedHarness is a harness whose pod lookups pass gate.
func newGatedHarness(t *testing.T, gate *allocationtest.Gate) *harness {
	return newHarnessWith(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 2}, func(l PodLookup) PodLookup {
		return gatedLookup{PodLookup: l, gate: gate}
	})
}

// The request was for a pod deleted while the informer lagged, and the
// scheduler bound the node's next pod at once: that pod is not served to
// this request (it would take its chips, and its own request the next
// pod's, down the node's queue), and the request is refused at once. Before
// the journal, this agent served any pending pod here.
func TestAllocateNeverServesAPodBoundAfterItsPodLeft(t *testing.T) {
	gate := allocationtest.NewGate(t)
	h := newGatedHarness(t, gate)
	done := make(chan error, 1)
	go func() { _, err := h.allocate(h.ids(1)...); done <- err }()
	waitUntil(t, "the request to look twice", func() bool { return gate.Calls() >= 2 })
	h.schedule(h.npuPod("a", ctr{1, 16000, -1}), nil)
	h.waitInformer("a", has("a"))
	h.deletePod("a")
	b := h.schedule(h.npuPod("b", ctr{1, 16000, -1}), nil)
	h.waitInformer("b without a", func(idx cache.Indexer) bool { return has("b")(idx) && !has("a")(idx) })
	start := time.Now()
	gate.Open()
	err := <-done
	if status.Code(err) != codes.NotFound || !strings.Contains(status.Convert(err).Message(), "no pending Ascend910B3 pod") {
		t.Fatalf("Allocate = %v, want NotFound: no pending pod", err)
	}
	if d := time.Since(start); d > 500*time.Millisecond {
		t.Errorf("refused %s after the informer caught up, want at once (InformerWait is 1 s)", d)
	}
	if got := h.pod("b").Annotations[ascendproto.AnnotationBindPhase]; got != ascendproto.BindPhaseAllocating {
		t.Errorf("b's bind-phase = %q, want it left %q for its own request", got, ascendproto.BindPhaseAllocating)
	}
	if n := h.lists.Load(); n != 0 {
		t.Errorf("LivePods called %d times, want 0", n)
	}
	// b's own request is served b.
	resp, err := h.allocate(h.ids(1)...)
	if err != nil {
		t.Fatalf("b's own Allocate: %v", err)
	}
	if got, want := resp.Envs[ascendproto.EnvVisibleDevices], h.phyIDs(b, 0); got != want {
		t.Errorf("b's own request got %q, want b's %q", got, want)
	}
	if got, want := h.pendingSources(), []string{allocation.PendingFromJournal, allocation.PendingFromInformer}; !cmp.Equal(got, want) {
		t.Errorf("pending sources %v, want %v", got, want)
	}
}

// A pending pod left (deleted) just before a request came, and the
// informer shows nothing pending: the request may be that pod's, which the
// journal cannot tell from one whose pod is still to come, so the agent
// asks the API server.
func TestAllocateAsksTheAPIServerAfterAPendingPodLeft(t *testing.T) {
	h := newHarness(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 2})
	h.schedule(h.npuPod("a", ctr{1, 16000, -1}), nil)
	h.waitInformer("a", has("a"))
	h.deletePod("a")
	h.waitInformer("a deleted", func(idx cache.Indexer) bool { return !has("a")(idx) })
	_, err := h.allocate(h.ids(1)...)
	if status.Code(err) != codes.NotFound {
		t.Fatalf("Allocate = %v, want NotFound", err)
	}
	if n := h.lists.Load(); n != 1 {
		t.Errorf("LivePods called %d times, want 1", n)
	}
	if got, want := h.pendingSources(), []string{allocation.PendingFromAPIServer}; !cmp.Equal(got, want) {
		t.Errorf("pending sources %v, want %v", got, want)
	}
}

// A pod that is pending in the API server when the request comes (the
// informer lags and the journal cannot vouch) is served; one created after
// the list is not, and waits for its own request.
func TestAllocateServesOnlyWhatTheAPIServerListed(t *testing.T) {
	gate := allocationtest.NewGate(t)
	h := newGatedHarness(t, gate)
	// A pending pod left: the journal will not vouch (horizon), so the
	// next request lists.
	h.schedule(h.npuPod("gone", ctr{1, 16000, -1}), nil)
	h.waitInformer("gone", has("gone"))
	h.deletePod("gone")
	h.waitInformer("gone deleted", func(idx cache.Indexer) bool { return !has("gone")(idx) })
	done := make(chan error, 1)
	go func() { _, err := h.allocate(h.ids(1)...); done <- err }()
	waitUntil(t, "the request to list", func() bool { return h.lists.Load() == 1 && gate.Calls() >= 2 })
	later := h.schedule(h.npuPod("later", ctr{1, 16000, -1}), nil)
	h.waitInformer("later", has("later"))
	gate.Open()
	if err := <-done; status.Code(err) != codes.NotFound {
		t.Fatalf("Allocate = %v, want NotFound (later was bound after the request came)", err)
	}
	if got := h.pod(later.Name).Annotations[ascendproto.AnnotationBindPhase]; got != ascendproto.BindPhaseAllocating {
		t.Errorf("later's bind-phase = %q, want %q", got, ascendproto.BindPhaseAllocating)
	}
}
