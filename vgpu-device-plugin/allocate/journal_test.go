package allocate_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/nodeagent/allocation/allocationtest"
	"github.com/vgpushare/vshare/nodeagent/kube"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// informerEnv is an allocator fed as the agent feeds it: the node's pods
// come through the agent's pod informer (client-go's, over the fake
// clientset's watch), which also feeds an allocation.Journal; LivePods is the
// agent's list, counted.
type informerEnv struct {
	*env
	client   *fake.Clientset
	informer cache.SharedIndexInformer
	journal  *allocation.Journal
	lists    atomic.Int32
	mu       sync.Mutex
	sources  []string // CountPending's sources, in order
}

func (ie *informerEnv) pendingSources() []string {
	ie.mu.Lock()
	defer ie.mu.Unlock()
	return append([]string(nil), ie.sources...)
}

// newInformerEnv starts the informer and ages the journal past its horizon
// (the journal's clock is fake; the rest waits in real time). wrap, when
// set, wraps the pod lookup.
func newInformerEnv(t *testing.T, wrap func(allocate.PodLookup) allocate.PodLookup) *informerEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clk := clocktesting.NewFakeClock(time.Now())
	ie := &informerEnv{client: fake.NewSimpleClientset()}
	ie.journal = allocation.NewJournal(allocate.Protocol, time.Minute, clk)
	ie.informer = kube.NewPodInformer(ctx, ie.client, nodeName, ie.journal.Listed)
	if err := ie.informer.AddIndexers(allocate.Indexers()); err != nil {
		t.Fatal(err)
	}
	if _, err := ie.informer.AddEventHandler(ie.journal); err != nil {
		t.Fatal(err)
	}
	go ie.informer.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), ie.informer.HasSynced) {
		t.Fatal("informer did not sync")
	}
	clk.Step(2 * time.Minute)
	live := kube.NodePods(ie.client, nodeName)
	ie.env = newEnv(t, func(_ *config.Config, o *allocate.Options) {
		o.InformerWait = 5 * time.Second
		var lookup allocate.PodLookup = allocate.IndexerLookup{Indexer: ie.informer.GetIndexer()}
		if wrap != nil {
			lookup = wrap(lookup)
		}
		o.Lookup = lookup
		o.Patcher = kube.Patcher{Client: ie.client, Node: nodeName}
		o.Journal = ie.journal
		o.LivePods = func(ctx context.Context) ([]*v1.Pod, error) {
			ie.lists.Add(1)
			return live(ctx)
		}
		o.CountPending = func(source string) {
			ie.mu.Lock()
			defer ie.mu.Unlock()
			ie.sources = append(ie.sources, source)
		}
	})
	return ie
}

func (ie *informerEnv) create(t *testing.T, pod *v1.Pod) {
	t.Helper()
	if _, err := ie.client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func (ie *informerEnv) delete(t *testing.T, name string) {
	t.Helper()
	if err := ie.client.CoreV1().Pods("ns").Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// waitInformer waits until the informer's copy satisfies ok.
func (ie *informerEnv) waitInformer(t *testing.T, what string, ok func(cache.Indexer) bool) {
	t.Helper()
	waitUntil(t, "the informer showing "+what, func() bool { return ok(ie.informer.GetIndexer()) })
}

var (
	waitUntil = allocationtest.WaitUntil
	has       = allocationtest.Has
)

func phaseOf(t *testing.T, ie *informerEnv, name string) string {
	t.Helper()
	p, err := ie.client.CoreV1().Pods("ns").Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return p.Annotations[vgpuproto.AnnotationBindPhase]
}

// The kubelet asks before the agent's informer has the pod: with the
// journal the agent waits for the informer and serves the pod without
// listing the node's pods from the API server (a quorum read of every pod
// of the cluster on a Kubernetes older than 1.31).
func TestAllocateJournalServesALatePodWithoutListing(t *testing.T) {
	ie := newInformerEnv(t, nil)
	done := make(chan error, 1)
	go func() { _, err := ie.alloc.Allocate(context.Background(), request(1)); done <- err }()
	time.Sleep(100 * time.Millisecond) // the informer's lag, in real time
	ie.create(t, newPod("late").container("c", 1, nil).allocated(entry(ie.uuids[0], 8000, 0), 100).build())
	if err := <-done; err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	if got := phaseOf(t, ie, "late"); got != vgpuproto.BindPhaseSuccess {
		t.Errorf("late's bind-phase = %q, want %q", got, vgpuproto.BindPhaseSuccess)
	}
	if n := ie.lists.Load(); n != 0 {
		t.Errorf("LivePods called %d times, want 0", n)
	}
	if got, want := ie.pendingSources(), []string{allocate.PendingFromJournal}; !cmp.Equal(got, want) {
		t.Errorf("pending sources %v, want %v", got, want)
	}
}

// gatedLookup holds the Allocating lookups after the first at the gate
// (allocationtest.Gate).
type gatedLookup struct {
	allocate.PodLookup
	gate *allocationtest.Gate
}

func (g gatedLookup) Allocating() ([]*v1.Pod, error) {
	g.gate.Pass()
	return g.PodLookup.Allocating()
}

// The request was for a pod deleted while the informer lagged, and the
// scheduler bound the node's next pod at once: that pod entered after the
// departure of one that entered after the request came, so it is not
// served to this request (it would take its cards, and its own request the
// next pod's, down the node's queue), and the request is refused without
// waiting out InformerWait or asking the API server.
func TestAllocateJournalNeverServesAPodBoundAfterItsPodLeft(t *testing.T) {
	gate := allocationtest.NewGate(t)
	ie := newInformerEnv(t, func(l allocate.PodLookup) allocate.PodLookup {
		return gatedLookup{PodLookup: l, gate: gate}
	})
	done := make(chan error, 1)
	go func() { _, err := ie.alloc.Allocate(context.Background(), request(1)); done <- err }()
	waitUntil(t, "the request to look twice", func() bool { return gate.Calls() >= 2 })
	ie.create(t, newPod("a").container("c", 1, nil).allocated(entry(ie.uuids[0], 8000, 0), 100).build())
	ie.waitInformer(t, "a", has("a"))
	ie.delete(t, "a")
	ie.create(t, newPod("b").container("c", 1, nil).allocated(entry(ie.uuids[1], 8000, 0), 200).build())
	ie.waitInformer(t, "b without a", func(idx cache.Indexer) bool { return has("b")(idx) && !has("a")(idx) })
	start := time.Now()
	gate.Open()
	err := <-done
	wantCode(t, err, codes.NotFound)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("refused %s after the informer caught up, want at once", d)
	}
	if got := phaseOf(t, ie, "b"); got != vgpuproto.BindPhaseAllocating {
		t.Errorf("b's bind-phase = %q, want it left %q for its own request", got, vgpuproto.BindPhaseAllocating)
	}
	if n := ie.lists.Load(); n != 0 {
		t.Errorf("LivePods called %d times, want 0", n)
	}
	// b's own request is served b.
	resp, err := ie.alloc.Allocate(context.Background(), request(1))
	if err != nil {
		t.Fatalf("b's own Allocate: %v", err)
	}
	if got := resp.ContainerResponses[0].Envs["NVIDIA_VISIBLE_DEVICES"]; got != ie.uuids[1] {
		t.Errorf("b's own request got %s, want %s", got, ie.uuids[1])
	}
	if got, want := ie.pendingSources(), []string{allocate.PendingFromJournal, allocate.PendingFromInformer}; !cmp.Equal(got, want) {
		t.Errorf("pending sources %v, want %v", got, want)
	}
}

// A pending pod left (deleted) just before a request came, and the
// informer shows nothing pending: the request may be that pod's, which the
// journal cannot tell from one whose pod is still to come, so the agent
// asks the API server, as without a journal.
func TestAllocateJournalAsksTheAPIServerAfterAPendingPodLeft(t *testing.T) {
	ie := newInformerEnv(t, nil)
	ie.create(t, newPod("a").container("c", 1, nil).allocated(entry(ie.uuids[0], 8000, 0), 100).build())
	ie.waitInformer(t, "a", has("a"))
	ie.delete(t, "a")
	ie.waitInformer(t, "a deleted", func(idx cache.Indexer) bool { return !has("a")(idx) })
	_, err := ie.alloc.Allocate(context.Background(), request(1))
	wantCode(t, err, codes.NotFound)
	if n := ie.lists.Load(); n != 1 {
		t.Errorf("LivePods called %d times, want 1", n)
	}
	if got, want := ie.pendingSources(), []string{allocate.PendingFromAPIServer}; !cmp.Equal(got, want) {
		t.Errorf("pending sources %v, want %v", got, want)
	}
}
