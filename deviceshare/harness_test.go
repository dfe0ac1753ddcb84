package deviceshare

import (
	"fmt"
	"io"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/vgpushare/vshare/backends/registry"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	testingclock "k8s.io/utils/clock/testing"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/cmd/scheduler/app/options"
	"volcano.sh/volcano/pkg/scheduler"
	_ "volcano.sh/volcano/pkg/scheduler/actions" // registers Volcano's actions
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/conf"
	"volcano.sh/volcano/pkg/scheduler/framework"
	_ "volcano.sh/volcano/pkg/scheduler/plugins" // registers Volcano's plugins
	"volcano.sh/volcano/pkg/scheduler/util"
)

const testNamespace = "team-a"

// testTime is the fake clocks' start.
var testTime = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

// TestMain sets the scheduler options Volcano's actions read, as its own
// action tests do, and consider every node (as a small cluster would).
//
// Volcano logs at level 0 from its cache and actions; those lines would be
// interleaved with benchmark results on go test's output, so logs are
// discarded unless VSHARE_TEST_LOGS is set.
func TestMain(m *testing.M) {
	if os.Getenv("VSHARE_TEST_LOGS") == "" {
		klog.LogToStderr(false)
		klog.SetOutput(io.Discard)
	}
	options.ServerOpts = &options.ServerOption{
		MinNodesToFind:             100,
		MinPercentageOfNodesToFind: 5,
		PercentageOfNodesToFind:    100,
	}
	os.Exit(m.Run())
}

// boundPod is what a binder received for one pod.
type boundPod struct {
	Node        string
	Annotations map[string]string
	// Locks are the node locks the binder would take first.
	Locks []string
}

// recordingBinder stands in for the API server's side of a bind: it
// records what the plugin's Binder would put on the v1.Binding (node and
// annotations, from the binder's Claim) and honours its refusals, the
// stale-inventory one included (so every session test also checks that an
// allocation carries the generations of the inventories it was made on).
type recordingBinder struct {
	st    *State
	mu    sync.Mutex
	binds map[string]boundPod
	ch    chan string
}

func (b *recordingBinder) Bind(_ kubernetes.Interface, tasks []*vcapi.TaskInfo) map[vcapi.TaskID]string {
	errs := map[vcapi.TaskID]string{}
	for _, t := range tasks {
		c, err := b.st.binder.Claim(t)
		if err != nil {
			errs[t.UID] = err.Error()
			continue
		}
		key := t.Namespace + "/" + t.Name
		var locks []string
		if c.Decision != nil && c.Decision.Locks != nil {
			locks = c.Decision.Locks.Keys
		}
		ann := c.Annotations
		b.mu.Lock()
		b.binds[key] = boundPod{Node: t.NodeName, Annotations: ann, Locks: locks}
		b.mu.Unlock()
		b.ch <- key
	}
	return errs
}

// cluster is a Volcano scheduler cache fed with in-memory objects, on which
// real sessions run real actions with the plugin under test.
type cluster struct {
	t       testing.TB
	st      *State
	clock   *testingclock.FakeClock
	cache   *cache.SchedulerCache
	binder  *recordingBinder
	actions []framework.Action
	tiers   []conf.Tier
	configs []conf.Configuration
	stop    chan struct{}
}

func newCluster(t testing.TB, schedulerConf string, nodes []*v1.Node, queues []*schedulingv1beta1.Queue) *cluster {
	t.Helper()
	return newClusterWith(t, schedulerConf, nodes, queues, util.NewFakeEvictor(100))
}

// newClusterWithEvictor is newCluster with an evictor the test reads.
func newClusterWithEvictor(t *testing.T, schedulerConf string, nodes []*v1.Node, evictor *util.FakeEvictor) *cluster {
	t.Helper()
	return newClusterWith(t, schedulerConf, nodes, nil, evictor)
}

func newClusterWith(t testing.TB, schedulerConf string, nodes []*v1.Node, queues []*schedulingv1beta1.Queue, evictor *util.FakeEvictor) *cluster {
	t.Helper()
	clk := testingclock.NewFakeClock(testTime)
	st := newTestState(Options{Clock: clk})
	framework.RegisterPluginBuilder(PluginName, st.Builder())
	actions, tiers, configs, _, err := scheduler.UnmarshalSchedulerConf(schedulerConf)
	if err != nil {
		t.Fatalf("parse scheduler conf: %v", err)
	}
	// The allocate action admits Pending jobs itself unless the scheduler
	// says enqueue runs, which Volcano's scheduler (and uthelper) record in
	// this package-level map.
	conf.EnabledActionMap = make(map[string]bool, len(actions))
	for _, a := range actions {
		conf.EnabledActionMap[a.Name()] = true
	}
	b := &recordingBinder{st: st, binds: map[string]boundPod{}, ch: make(chan string, 1000)}
	sc := cache.NewCustomMockSchedulerCache("volcano", b, evictor, &util.FakeStatusUpdater{},
		nil, nil, record.NewFakeRecorder(1000))
	for _, n := range nodes {
		if err := sc.AddOrUpdateNode(n); err != nil {
			t.Fatalf("add node %s: %v", n.Name, err)
		}
	}
	if len(queues) == 0 {
		queues = []*schedulingv1beta1.Queue{util.BuildQueue("default", 1, nil)}
	}
	for _, q := range queues {
		sc.AddQueueV1beta1(q)
	}
	c := &cluster{t: t, st: st, clock: clk, cache: sc, binder: b, actions: actions, tiers: tiers,
		configs: configs, stop: make(chan struct{})}
	sc.Run(c.stop)
	t.Cleanup(func() { close(c.stop) })
	return c
}

func (c *cluster) addJob(pg *schedulingv1beta1.PodGroup, pods ...*v1.Pod) {
	c.cache.AddPodGroupV1beta1(pg)
	for _, p := range pods {
		c.cache.AddPod(p)
	}
}

// session runs one scheduling cycle; inspect, if given, sees the session
// after the actions and before it closes.
func (c *cluster) session(inspect func(ssn *framework.Session)) {
	ssn := framework.OpenSession(c.cache, c.tiers, c.configs)
	for _, a := range c.actions {
		a.Initialize()
		a.Execute(ssn)
		a.UnInitialize()
	}
	if inspect != nil {
		inspect(ssn)
	}
	framework.CloseSession(ssn)
}

// waitBinds waits for n binds and returns everything bound so far.
func (c *cluster) waitBinds(n int) map[string]boundPod {
	c.t.Helper()
	deadline := time.After(10 * time.Second)
	for i := 0; i < n; i++ {
		select {
		case <-c.binder.ch:
		case <-deadline:
			c.t.Fatalf("waited for %d binds, got %d: %v", n, i, c.bound())
		}
	}
	return c.bound()
}

// expectNoBind fails if a bind arrives within a short grace period (binds
// are asynchronous in Volcano's cache).
func (c *cluster) expectNoBind() {
	c.t.Helper()
	select {
	case key := <-c.binder.ch:
		c.t.Fatalf("unexpected bind of %s (all: %v)", key, c.bound())
	case <-time.After(200 * time.Millisecond):
	}
}

func (c *cluster) bound() map[string]boundPod {
	c.binder.mu.Lock()
	defer c.binder.mu.Unlock()
	out := make(map[string]boundPod, len(c.binder.binds))
	for k, v := range c.binder.binds {
		out[k] = v
	}
	return out
}

// confirmBinds plays the API server and the informer: the bound pods come
// back on their nodes, Running, with the binding's annotations.
func (c *cluster) confirmBinds(pods ...*v1.Pod) []*v1.Pod {
	c.t.Helper()
	bound := c.bound()
	out := make([]*v1.Pod, 0, len(pods))
	for _, p := range pods {
		b, ok := bound[p.Namespace+"/"+p.Name]
		if !ok {
			c.t.Fatalf("pod %s/%s was not bound", p.Namespace, p.Name)
		}
		np := p.DeepCopy()
		np.Spec.NodeName = b.Node
		np.Status.Phase = v1.PodRunning
		np.ResourceVersion = "2"
		for k, v := range b.Annotations {
			np.Annotations[k] = v
		}
		c.cache.UpdatePod(p, np)
		out = append(out, np)
	}
	return out
}

func gpuNode(name string, cards int, memPerCard int64) *v1.Node {
	res := v1.ResourceList{
		v1.ResourceCPU:    resource.MustParse("64"),
		v1.ResourceMemory: resource.MustParse("256Gi"),
		v1.ResourcePods:   resource.MustParse("110"),
	}
	if cards > 0 {
		res["volcano.sh/gpu-number"] = *resource.NewQuantity(int64(cards), resource.DecimalSI)
		res["volcano.sh/gpu-memory"] = *resource.NewQuantity(int64(cards)*memPerCard, resource.DecimalSI)
	}
	return util.BuildNode(name, res, nil)
}

// devicePod builds a pending pod of a PodGroup asking for the given extra
// resources (limits and requests, as extended resources require).
func devicePod(name, group string, extra v1.ResourceList) *v1.Pod {
	req := v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}
	for k, v := range extra {
		req[k] = v
	}
	p := util.BuildPod(testNamespace, name, "", v1.PodPending, req, group, nil, nil)
	p.UID = types.UID("uid-" + name)
	p.Spec.SchedulerName = "volcano"
	p.Spec.Containers[0].Name = "main"
	p.Spec.Containers[0].Resources.Limits = extra.DeepCopy()
	p.CreationTimestamp = metav1.Now()
	return p
}

func gpuMemPod(name, group string, mib int64) *v1.Pod {
	return devicePod(name, group, v1.ResourceList{"volcano.sh/gpu-memory": *resource.NewQuantity(mib, resource.DecimalSI)})
}

func gpuNumPod(name, group string, n int64) *v1.Pod {
	return devicePod(name, group, v1.ResourceList{"volcano.sh/gpu-number": *resource.NewQuantity(n, resource.DecimalSI)})
}

func podGroup(name string, minMember int32) *schedulingv1beta1.PodGroup {
	return util.BuildPodGroup(name, testNamespace, "default", minMember, nil, schedulingv1beta1.PodGroupInqueue)
}

func schedulerConf(args string) string {
	return fmt.Sprintf(`
actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
%s
`, args)
}

// fitMessage returns the fit error Volcano recorded for a task, as users
// see it in events and PodGroup conditions.
func fitMessage(ssn *framework.Session, pod *v1.Pod) string {
	for _, job := range ssn.Jobs {
		for uid, fe := range job.NodesFitErrors {
			if uid == vcapi.TaskID(pod.UID) {
				return fe.Error()
			}
		}
	}
	return ""
}

// newTestState is NewState with, unless opts name one, the backend factory
// the scheduler command passes (registry.Scheduler).
func newTestState(opts Options) *State {
	if opts.Backends == nil {
		opts.Backends = registry.Scheduler()
	}
	return NewState(opts)
}

func nodeInfo(t *testing.T, node *v1.Node, pods ...*v1.Pod) map[string]*vcapi.NodeInfo {
	t.Helper()
	ni := vcapi.NewNodeInfo(node)
	for _, p := range pods {
		if err := ni.AddTask(vcapi.NewTaskInfo(p)); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]*vcapi.NodeInfo{node.Name: ni}
}
