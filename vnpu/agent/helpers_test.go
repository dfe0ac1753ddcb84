package agent

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	ascendbackend "github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin/fakekubelet"
	"github.com/vgpushare/vshare/nodeagent/kube"
	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

const testNode = "n1"

// entryOf returns a built-in vnpus entry.
func entryOf(t *testing.T, commonWord string) config.VNPUConfig {
	t.Helper()
	e, ok := config.Default().VNPUs.Chip(commonWord)
	if !ok {
		t.Fatalf("no built-in vnpus entry %s", commonWord)
	}
	return e
}

func newInventory(t *testing.T, s Spec) *Inventory {
	t.Helper()
	inv, err := NewInventory(s)
	if err != nil {
		t.Fatalf("NewInventory: %v", err)
	}
	return inv
}

// harness is one simulated node: a fake API server holding node n1 (with
// the agent's registration), the agent's pod informer and Allocator, and
// the device plugin registered with a fake kubelet on a unix socket.
type harness struct {
	t        *testing.T
	ctx      context.Context
	client   *fake.Clientset
	inv      *Inventory
	backend  *ascendbackend.Backend
	keys     ascendproto.Keys
	register *pluginapi.RegisterRequest
	dp       pluginapi.DevicePluginClient
	devices  []*pluginapi.Device
	// informer and journal are the agent's pod informer and the journal it
	// feeds; lists counts the agent's LivePods lists and sources the
	// allocator's CountPending calls.
	informer cache.SharedIndexInformer
	journal  *allocation.Journal
	lists    atomic.Int32
	mu       sync.Mutex
	sources  []string
}

func (h *harness) pendingSources() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.sources...)
}

func newHarness(t *testing.T, s Spec) *harness {
	t.Helper()
	return newHarnessWith(t, s, nil)
}

// newHarnessWith is newHarness with the allocator's pod lookup wrapped by
// wrap (when set). The agent's pod informer feeds an allocation.Journal, as
// in Serve; its clock is fake and stepped past the journal's horizon after
// the informer's first list, so the journal vouches from the start.
func newHarnessWith(t *testing.T, s Spec, wrap func(PodLookup) PodLookup) *harness {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	h := &harness{t: t, ctx: ctx, inv: newInventory(t, s), keys: ascendproto.KeysFor(s.Entry.CommonWord),
		client: fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}})}
	patcher := kube.Patcher{Client: h.client, Node: testNode, LockName: ascendproto.NodeLockName}
	reg, err := NewRegistrar(RegistrarOptions{Node: testNode, Inventory: h.inv, Patcher: patcher})
	if err != nil {
		t.Fatal(err)
	}
	reg.ObserveNode(h.node())
	if _, err := reg.Sync(ctx); err != nil {
		t.Fatalf("register: %v", err)
	}
	if h.backend, err = ascendbackend.New(ascendbackend.Options{Chip: s.Entry}); err != nil {
		t.Fatal(err)
	}

	clk := clocktesting.NewFakeClock(time.Now())
	h.journal = allocation.NewJournal(Protocol(s.Entry.CommonWord), time.Minute, clk)
	podInf := kube.NewPodInformer(ctx, h.client, testNode, h.journal.Listed)
	if err := podInf.AddIndexers(Indexers(s.Entry.CommonWord)); err != nil {
		t.Fatal(err)
	}
	if _, err := podInf.AddEventHandler(h.journal); err != nil {
		t.Fatal(err)
	}
	h.informer = podInf
	go podInf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced) {
		t.Fatal("pod informer did not sync")
	}
	clk.Step(2 * time.Minute)
	var lookup PodLookup = IndexerLookup{Indexer: podInf.GetIndexer(), CommonWord: s.Entry.CommonWord}
	if wrap != nil {
		lookup = wrap(lookup)
	}
	live := kube.NodePods(h.client, testNode)
	alloc, err := NewAllocator(AllocatorOptions{Node: testNode, Inventory: h.inv, Patcher: patcher,
		Lookup: lookup, InformerWait: time.Second, Journal: h.journal,
		LivePods: func(ctx context.Context) ([]*v1.Pod, error) {
			h.lists.Add(1)
			return live(ctx)
		},
		CountPending: func(source string) {
			h.mu.Lock()
			defer h.mu.Unlock()
			h.sources = append(h.sources, source)
		}})
	if err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	kubelet := fakekubelet.Start(t, dir)
	never := make(chan struct{})
	p, err := deviceplugin.New(deviceplugin.Options{ResourceName: s.Entry.ResourceName, SocketDir: dir, SocketName: s.Entry.CommonWord + ".sock",
		Devices: h.inv.Devices, Changed: func() <-chan struct{} { return never }, Allocator: alloc})
	if err != nil {
		t.Fatal(err)
	}
	pctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(pctx) }()
	t.Cleanup(func() { stop(); <-done })
	h.register = kubelet.Wait(t)
	h.dp = pluginapi.NewDevicePluginClient(fakekubelet.Dial(t, p.SocketPath()))
	stream, err := h.dp.ListAndWatch(ctx, &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	h.devices = list.Devices
	return h
}

func (h *harness) node() *v1.Node {
	h.t.Helper()
	n, err := h.client.CoreV1().Nodes().Get(h.ctx, testNode, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) pod(name string) *v1.Pod {
	h.t.Helper()
	p, err := h.client.CoreV1().Pods("ns").Get(h.ctx, name, metav1.GetOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return p
}

// ctr is one container's request; negative values leave the resource out.
type ctr struct{ n, mem, cores int64 }

// npuPod asks for the harness's chip type.
func (h *harness) npuPod(name string, ctrs ...ctr) *v1.Pod {
	e := h.inv.Entry()
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name), Annotations: map[string]string{}}}
	for i, c := range ctrs {
		l := v1.ResourceList{}
		for res, v := range map[string]int64{e.ResourceName: c.n, e.ResourceMemoryName: c.mem, e.ResourceCoreName: c.cores} {
			if v >= 0 {
				l[v1.ResourceName(res)] = *resource.NewQuantity(v, resource.DecimalSI)
			}
		}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + strconv.Itoa(i), Resources: v1.ResourceRequirements{Limits: l}})
	}
	return p
}

// schedule does what the scheduler does: decode the node's registration
// with backends/ascend, allocate, take the node lock for the pod and bind
// it to n1 with the allocation annotations; edit changes the pod before it
// is created.
func (h *harness) schedule(pod *v1.Pod, edit func(*v1.Pod)) *v1.Pod {
	h.t.Helper()
	d, err := h.backend.NewDevices(h.node())
	if err != nil || d == nil {
		h.t.Fatalf("NewDevices on the registered node: %v, %v", d, err)
	}
	r, err := d.Allocate(pod, "binpack")
	if err != nil {
		h.t.Fatalf("backend Allocate(%s): %v", pod.Name, err)
	}
	for k, v := range r.Annotations {
		pod.Annotations[k] = v
	}
	pod.Spec.NodeName = testNode
	if edit != nil {
		edit(pod)
	}
	n := h.node()
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[ascendproto.NodeLockName] = nodelock.Format(time.Now(), types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
	if _, err := h.client.CoreV1().Nodes().Update(h.ctx, n, metav1.UpdateOptions{}); err != nil {
		h.t.Fatal(err)
	}
	created, err := h.client.CoreV1().Pods(pod.Namespace).Create(h.ctx, pod, metav1.CreateOptions{})
	if err != nil {
		h.t.Fatal(err)
	}
	return created
}

// allocate asks for n devices the way the kubelet does, taking the first n
// advertised IDs (the agent must not care which).
func (h *harness) allocate(ids ...string) (*pluginapi.ContainerAllocateResponse, error) {
	resp, err := h.dp.Allocate(h.ctx, &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: ids}}})
	if err != nil {
		return nil, err
	}
	if len(resp.ContainerResponses) != 1 {
		h.t.Fatalf("Allocate returned %d container responses, want 1", len(resp.ContainerResponses))
	}
	return resp.ContainerResponses[0], nil
}

// ids returns the first n advertised device IDs.
func (h *harness) ids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = h.devices[i].ID
	}
	return out
}
