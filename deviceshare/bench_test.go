package deviceshare

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/cmd/scheduler/app/options"
	"volcano.sh/volcano/pkg/scheduler"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/gpushare"
	"volcano.sh/volcano/pkg/scheduler/cache"
	"volcano.sh/volcano/pkg/scheduler/conf"
	"volcano.sh/volcano/pkg/scheduler/framework"
	builtin "volcano.sh/volcano/pkg/scheduler/plugins/deviceshare"
	"volcano.sh/volcano/pkg/scheduler/util"
)

// countingBinder counts binds; both implementations bind through it.
type countingBinder struct{ n atomic.Int64 }

func (b *countingBinder) Bind(_ kubernetes.Interface, tasks []*vcapi.TaskInfo) map[vcapi.TaskID]string {
	b.n.Add(int64(len(tasks)))
	return nil
}

// benchPods returns GPU-share pods in gangs of four with a repeating mix
// of sizes (MiB), the same for every implementation.
func benchPods(n int) ([]*v1.Pod, []string) {
	sizes := []int64{2000, 4000, 6000, 8000, 3000, 5000}
	pods := make([]*v1.Pod, 0, n)
	var groups []string
	for i := 0; i < n; i++ {
		group := fmt.Sprintf("pg%d", i/4)
		if i%4 == 0 {
			groups = append(groups, group)
		}
		pods = append(pods, gpuMemPod(fmt.Sprintf("p%d", i), group, sizes[i%len(sizes)]))
	}
	return pods, groups
}

// BenchmarkAllocateGPUShare runs Volcano's allocate action over one
// session with GPU-share pods (two per node), with Volcano v1.10.0's
// built-in deviceshare and with ours, on identical clusters and plugin
// sets. Compare with benchstat (hack/bench.sh); pods/s is reported.
func BenchmarkAllocateGPUShare(b *testing.B) {
	saved := options.ServerOpts
	// Volcano's defaults for a production scheduler.
	options.ServerOpts = &options.ServerOption{MinNodesToFind: 100, MinPercentageOfNodesToFind: 5, PercentageOfNodesToFind: 0}
	defer func() { options.ServerOpts = saved }()
	for _, plugins := range []string{"device", "full"} {
		for _, nodes := range benchNodeCounts() {
			for _, impl := range []string{"builtin", "ours"} {
				b.Run(fmt.Sprintf("plugins=%s/nodes=%d/impl=%s", plugins, nodes, impl), func(b *testing.B) {
					benchAllocate(b, impl, benchConf(plugins), nodes, 2*nodes)
				})
			}
		}
	}
}

// benchConf returns the scheduler configuration: "full" is a typical
// production plugin set; "device" keeps only what device scheduling needs
// (gang, predicates, which runs the built-in's allocation, and deviceshare),
// so the device plugin's own cost is not hidden by the others'.
func benchConf(plugins string) string {
	args := `      deviceshare.GPUSharingEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10`
	if plugins == "full" {
		return schedulerConf(args)
	}
	return fmt.Sprintf(`
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: predicates
  - name: deviceshare
    arguments:
%s
`, args)
}

func benchAllocate(b *testing.B, impl, conf string, nodes, npods int) {
	_, tiers, configs, _, err := scheduler.UnmarshalSchedulerConf(conf)
	if err != nil {
		b.Fatal(err)
	}
	allocate, ok := framework.GetAction("allocate")
	if !ok {
		b.Fatal("Volcano's allocate action is not registered")
	}
	var bound int64
	var elapsed float64
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var st *State
		if impl == "builtin" {
			framework.RegisterPluginBuilder(PluginName, builtin.New)
		} else {
			st = newTestState(Options{})
			framework.RegisterPluginBuilder(PluginName, st.Builder())
		}
		nodeList := make([]*v1.Node, nodes)
		for n := range nodeList {
			nodeList[n] = gpuNode(fmt.Sprintf("n%04d", n), 8, 16000)
		}
		pods, groups := benchPods(npods)
		// Volcano's built-in patches each pod through the API; give it the
		// pods so its patches succeed.
		sc := benchCache(b, nodeList, pods, gangsOfFour(groups), impl == "builtin")
		b.StartTimer()
		start := time.Now()
		dispatched := runAllocate(sc, tiers, configs, allocate)
		elapsed += time.Since(start).Seconds()
		b.StopTimer()
		bound += int64(dispatched)
		// Volcano's built-in keeps its switches in package variables; leave
		// them off for whatever runs next in this process.
		gpushare.GpuSharingEnable = false
		if st != nil {
			st.Close()
		}
	}
	if bound == 0 {
		b.Fatalf("%s: nothing was allocated", impl)
	}
	b.ReportMetric(float64(bound)/elapsed, "pods/s")
	b.ReportMetric(float64(bound)/float64(b.N), "allocated/op")
}

// benchCache returns a Volcano scheduler cache holding the nodes, a default
// queue, the PodGroups and the pods; with inClient the pods are also created
// in the cache's clientset, for Volcano's built-in devices, which patch pods
// through it.
func benchCache(tb testing.TB, nodes []*v1.Node, pods []*v1.Pod, groups []*schedulingv1beta1.PodGroup, inClient bool) *cache.SchedulerCache {
	tb.Helper()
	sc := cache.NewCustomMockSchedulerCache("volcano", &countingBinder{}, util.NewFakeEvictor(0), &util.FakeStatusUpdater{},
		nil, nil, &record.FakeRecorder{})
	for _, n := range nodes {
		if err := sc.AddOrUpdateNode(n); err != nil {
			tb.Fatal(err)
		}
	}
	sc.AddQueueV1beta1(util.BuildQueue("default", 1, nil))
	for _, g := range groups {
		sc.AddPodGroupV1beta1(g)
	}
	for _, p := range pods {
		sc.AddPod(p)
		if !inClient {
			continue
		}
		if _, err := sc.Client().CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			tb.Fatal(err)
		}
	}
	return sc
}

// gangsOfFour is the PodGroups of the anonymous workloads: each needs
// four members, but "teach", which needs 65 (see noDeviceBenchPods).
func gangsOfFour(names []string) []*schedulingv1beta1.PodGroup {
	out := make([]*schedulingv1beta1.PodGroup, 0, len(names))
	for _, g := range names {
		min := int32(4)
		if g == "teach" {
			min = 65
		}
		out = append(out, podGroup(g, min))
	}
	return out
}

// runAllocate runs one session with the allocate action and returns how
// many tasks it sent to bind.
func runAllocate(sc *cache.SchedulerCache, tiers []conf.Tier, configs []conf.Configuration, allocate framework.Action) int {
	return runAllocateInspect(sc, tiers, configs, allocate, nil)
}

// runAllocateInspect is runAllocate; inspect, if given, sees the session
// after the action and before it closes.
func runAllocateInspect(sc *cache.SchedulerCache, tiers []conf.Tier, configs []conf.Configuration, allocate framework.Action,
	inspect func(*framework.Session)) int {
	// The cache queues each bound task on a 5000-slot channel that its bind
	// worker drains; benchmarks run no worker, so drain it here or a session
	// binding more than 5000 pods blocks.
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case <-sc.BindFlowChannel:
			case <-done:
				return
			}
		}
	}()
	// As the scheduler does when it loads its configuration: only the
	// allocate action runs.
	saved := conf.EnabledActionMap
	conf.EnabledActionMap = map[string]bool{allocate.Name(): true}
	defer func() { conf.EnabledActionMap = saved }()
	ssn := framework.OpenSession(sc, tiers, configs)
	allocate.Initialize()
	allocate.Execute(ssn)
	allocate.UnInitialize()
	dispatched := countDispatched(ssn)
	if inspect != nil {
		inspect(ssn)
	}
	framework.CloseSession(ssn)
	return dispatched
}

// countDispatched counts the tasks the session sent to bind (before the
// session closes and drops its jobs).
func countDispatched(ssn *framework.Session) int {
	n := 0
	for _, job := range ssn.Jobs {
		n += len(job.TaskStatusIndex[vcapi.Binding])
	}
	return n
}

// benchNodeCounts are the cluster sizes: 100 and 1000 nodes of 8 GPUs,
// or the comma-separated BENCH_NODES for a quick look.
func benchNodeCounts() []int {
	v := os.Getenv("BENCH_NODES")
	if v == "" {
		return []int{100, 1000}
	}
	var out []int
	for _, f := range strings.Split(v, ",") {
		if n, err := strconv.Atoi(strings.TrimSpace(f)); err == nil && n > 0 {
			out = append(out, n)
		}
	}
	return out
}
