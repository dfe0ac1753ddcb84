package deviceshare

import (
	"fmt"
	"os"
	goruntime "runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/cmd/scheduler/app/options"
	"volcano.sh/volcano/pkg/scheduler"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	builtinvgpu "volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu"
	"volcano.sh/volcano/pkg/scheduler/framework"
	builtin "volcano.sh/volcano/pkg/scheduler/plugins/deviceshare"

	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/deviceshare/bind"
	"github.com/vgpushare/vshare/deviceshare/nodestate"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/deviceshare/volcano"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// vgpuBenchPods returns vGPU pods in gangs of four with a repeating mix of
// card counts (1 to 8), memory (MiB per card) and cores, the same for every
// implementation.
func vgpuBenchPods(n int) ([]*v1.Pod, []string) {
	nums := []int64{1, 2, 1, 4, 1, 8, 2, 1}
	mems := []int64{4000, 8000, 16000, 2000, 12000, 6000, 24000, 10000}
	cores := []int64{10, 20, 30, 0, 25, 15, 50, 5}
	pods := make([]*v1.Pod, 0, n)
	var groups []string
	for i := 0; i < n; i++ {
		group := fmt.Sprintf("pg%d", i/4)
		if i%4 == 0 {
			groups = append(groups, group)
		}
		pods = append(pods, vgpuPod(fmt.Sprintf("p%d", i), group, nums[i%len(nums)], mems[i%len(mems)], cores[i%len(cores)]))
	}
	return pods, groups
}

// vgpuBenchNode is a node with 8 cards of 80 GiB. Its status already
// shows the totals our plugin advertises (as it does after the first
// session in a real cluster), so the advertiser stays idle.
func vgpuBenchNode(i int) *v1.Node {
	cards := make([]vcard, 8)
	for c := range cards {
		cards[c] = vcard{uuid: fmt.Sprintf("GPU-%04d-%d", i, c), typ: "NVIDIA-A100-SXM4-80GB", mem: 81920}
	}
	n := vgpuNode(fmt.Sprintf("n%04d", i), cards...)
	for res, v := range map[v1.ResourceName]int64{"volcano.sh/vgpu-memory": 8 * 81920,
		"volcano.sh/vgpu-memory-percentage": 800, "volcano.sh/vgpu-cores": 800, "volcano.sh/vgpu-priority": 80} {
		q := *resource.NewQuantity(v, resource.DecimalSI)
		n.Status.Capacity[res], n.Status.Allocatable[res] = q, q
	}
	return n
}

// vgpuBenchConf is gang and deviceshare (VGPUEnable, with the schedule
// policy) in the first tier and predicates in the second, in the order of
// the shipped configuration (deploy: deviceshare in tier 0 beside
// gang, predicates in tier 1): Volcano runs predicates in tier order and
// stops at the first that fails, so a node whose cards cannot take the pod
// is not also checked by the predicates plugin.
func vgpuBenchConf(policy string) string { return deviceBenchConf("deviceshare.VGPUEnable", policy) }

// deviceBenchConf is vgpuBenchConf with the device type the enable
// argument names.
func deviceBenchConf(enable, policy string) string {
	return `
actions: "allocate"
tiers:
- plugins:
  - name: gang
  - name: deviceshare
    arguments:
      ` + enable + `: true
      deviceshare.SchedulePolicy: ` + policy + `
      deviceshare.ScheduleWeight: 10
- plugins:
  - name: predicates
`
}

// throttledBuiltin points Volcano's built-in vGPU client at the real
// kube-apiserver in BENCH_KUBECONFIG, built by the built-in's own NewClient,
// so it keeps client-go's default limit of 5 requests per second as it
// ships. e2e/cmd/benchapi (make bench) starts that API server with the
// benchmark's nodes and pods in it. It returns the function that puts the
// previous client back.
func throttledBuiltin(b *testing.B) func() {
	b.Helper()
	path := os.Getenv("BENCH_KUBECONFIG")
	if path == "" {
		b.Fatal("impl=builtin talks to a real kube-apiserver holding the benchmark's nodes and pods: " +
			"BENCH_KUBECONFIG is empty; run it through `go run -tags e2e ./e2e/cmd/benchapi` (make bench), " +
			"or use impl=builtin-unthrottled")
	}
	saved := volcano.BuiltinVGPUClient()
	b.Setenv("KUBECONFIG", path)
	if _, err := builtinvgpu.NewClient(); err != nil {
		b.Fatalf("BENCH_KUBECONFIG=%s: %v", path, err)
	}
	return func() { volcano.SetBuiltinVGPUClient(saved) }
}

// BenchmarkAllocateVGPU runs Volcano's allocate action over one session of
// vGPU pods (1000, or BENCH_PODS; gangs of four, 1 to 8 cards each) on nodes of
// 8 x 80 GiB cards, with Volcano v1.10.0's built-in vGPU deviceshare and
// with ours, on identical clusters, pods and plugin sets (gang and deviceshare, then
// predicates, as shipped; all binpack but impl=ours-fragment, which is ours with
// deviceshare.SchedulePolicy: fragment). impl=noop registers, as
// deviceshare, a plugin with the same
// extension points that does nothing: the session's cost without any device
// work (Volcano's built-in vGPU only acts when its own deviceshare plugin
// set vgpu.VGPUEnable). Per implementation the report gives pods/s and
// us/pod; us/pod minus noop's, from the same process, is the time spent in
// the device plugin's callbacks (and, for impl=builtin, its synchronous pod
// patch to the real kube-apiserver in BENCH_KUBECONFIG, behind client-go's
// default 5 QPS limit as the built-in ships: see throttledBuiltin), and
// cpu-us/pod, the process CPU time per bound pod,
// which leaves out waiting. cb-us/pod is the time measured inside the
// device plugin's own code (callbackTimer: its registered functions,
// session open and close, and for the built-in its card work Volcano runs
// outside the plugin), per bound pod; cb-calls/pod counts those calls, and
// noop's cb-us/pod is the timer's own overhead. BENCH_NODES overrides the
// node counts.
func BenchmarkAllocateVGPU(b *testing.B) {
	saved := options.ServerOpts
	options.ServerOpts = &options.ServerOption{MinNodesToFind: 100, MinPercentageOfNodesToFind: 5, PercentageOfNodesToFind: 0}
	defer func() { options.ServerOpts = saved }()
	counts := []int{1000, 5000}
	if os.Getenv("BENCH_NODES") != "" {
		counts = benchNodeCounts()
	}
	npods := 1000
	if v, err := strconv.Atoi(os.Getenv("BENCH_PODS")); err == nil && v > 0 {
		npods = v
	}
	impls := []string{"noop", "floor", "builtin-unthrottled", "ours", "ours-fragment"}
	if v := os.Getenv("BENCH_IMPLS"); v != "" {
		impls = strings.Split(v, ",")
	}
	workloads := []string{"anonymous"}
	if v := os.Getenv("BENCH_WORKLOAD"); v != "" {
		workloads = strings.Split(v, ",")
	}
	for _, nodes := range counts {
		for _, name := range workloads {
			workload, ok := benchWorkloadNamed(name)
			if !ok {
				b.Fatalf("BENCH_WORKLOAD=%s: workload %q: want anonymous or jobs", os.Getenv("BENCH_WORKLOAD"), name)
			}
			for _, impl := range impls {
				b.Run(fmt.Sprintf("nodes=%d/pods=%d/workload=%s/impl=%s", nodes, npods, name, impl), func(b *testing.B) {
					benchAllocateVGPU(b, impl, nodes, npods, workload)
				})
			}
		}
	}
}

// BenchmarkAllocateNoDevicePods is what scoring pods without devices
// costs under the fragment policy (docs/quality.md, "One code path"):
// 1000 pods asking only for CPU and memory, after 64 pending vGPU pods
// that teach the fragment policy a workload, on 1000 nodes of 8 cards.
// Under binpack the plugin does not score such pods (ours), so ours /
// ours-fragment is the cost and noop the session without device work.
func BenchmarkAllocateNoDevicePods(b *testing.B) {
	saved := options.ServerOpts
	options.ServerOpts = &options.ServerOption{MinNodesToFind: 100, MinPercentageOfNodesToFind: 5, PercentageOfNodesToFind: 0}
	defer func() { options.ServerOpts = saved }()
	for _, impl := range []string{"noop", "ours", "ours-fragment"} {
		b.Run("nodes=1000/pods=1000/impl="+impl, func(b *testing.B) {
			benchAllocateVGPU(b, impl, 1000, 1000, func(n int) ([]*v1.Pod, []*schedulingv1beta1.PodGroup) {
				pods, groups := noDeviceBenchPods(n)
				return pods, gangsOfFour(groups)
			})
		})
	}
}

// noDeviceBenchPods is n pods without devices in gangs of four, then a
// gang of 64 vGPU pods that needs 65 members: Volcano's gang plugin never
// lets allocate try it, but the plugin sees its pending pods, which teach
// the fragment policy a workload.
func noDeviceBenchPods(n int) ([]*v1.Pod, []string) {
	pods := make([]*v1.Pod, 0, n+64)
	var groups []string
	for i := 0; i < n; i++ {
		group := fmt.Sprintf("pg%d", i/4)
		if i%4 == 0 {
			groups = append(groups, group)
		}
		pods = append(pods, devicePod(fmt.Sprintf("p%d", i), group, nil))
	}
	groups = append(groups, "teach")
	for i := 0; i < 64; i++ {
		pods = append(pods, vgpuPod(fmt.Sprintf("t%d", i), "teach", int64(1+i%2), int64(4000*(1+i%4)), int64(10*(1+i%5))))
	}
	return pods, groups
}

func benchAllocateVGPU(b *testing.B, impl string, nodes, npods int, workload benchWorkload) {
	benchAllocateDevice(b, vgpuBenchDevice(), impl, nodes, npods, workload)
}

// benchDevice is a device type the allocate benchmark runs: its scheduler
// configuration under a policy, its i-th node and its floor.
type benchDevice struct {
	conf  func(policy string) string
	node  func(i int) *v1.Node
	floor floorResource
}

// vgpuBenchDevice is vGPU: nodes of 8 x 80 GiB cards.
func vgpuBenchDevice() benchDevice {
	return benchDevice{conf: vgpuBenchConf, node: vgpuBenchNode, floor: vgpuFloor()}
}

// benchAllocateDevice runs one allocate session per iteration of the
// device's nodes and the workload's pods under impl, and reports pods/s,
// the per-pod times, the callbacks' time and calls, the pods allocated and
// the peak heap (see BenchmarkAllocateVGPU).
func benchAllocateDevice(b *testing.B, dev benchDevice, impl string, nodes, npods int, workload benchWorkload) {
	policy := "binpack"
	if impl == "ours-fragment" {
		policy = "fragment" // deviceshare.SchedulePolicy: fragment (docs/quality.md)
	}
	_, tiers, configs, _, err := scheduler.UnmarshalSchedulerConf(dev.conf(policy))
	if err != nil {
		b.Fatal(err)
	}
	allocate, _ := framework.GetAction("allocate")
	var bound int64
	var elapsed, cpu float64
	var peak uint64
	var timer callbackTimer
	timed := func(pl framework.Plugin) framework.Plugin {
		return timedPlugin{Plugin: pl, t: &timer, devices: strings.HasPrefix(impl, "builtin")}
	}
	// Only impl=builtin reaches an API server; every other implementation
	// gets the in-memory client, so that nothing the built-in vGPU code
	// still does on its own (a node handshake) leaves the process.
	if impl == "builtin" {
		defer throttledBuiltin(b)()
	} else {
		defer unthrottleBuiltin()()
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		var st *State
		switch impl {
		case "builtin", "builtin-unthrottled":
			framework.RegisterPluginBuilder(PluginName, func(a framework.Arguments) framework.Plugin { return timed(builtin.New(a)) })
		case "noop":
			framework.RegisterPluginBuilder(PluginName, func(framework.Arguments) framework.Plugin { return timed(noopPlugin{}) })
		case "floor":
			framework.RegisterPluginBuilder(PluginName, func(a framework.Arguments) framework.Plugin { return timed(floorBuilder(dev.floor)(a)) })
		default:
			st = newTestState(Options{})
			build := st.Builder()
			framework.RegisterPluginBuilder(PluginName, func(a framework.Arguments) framework.Plugin { return timed(build(a)) })
		}
		nodeList := make([]*v1.Node, nodes)
		for n := range nodeList {
			nodeList[n] = dev.node(n)
		}
		pods, groups := workload(npods)
		resetBuiltinVGPUMetrics()
		sc := benchCache(b, nodeList, pods, groups, false)
		goruntime.GC()
		b.StartTimer()
		stopPeak := samplePeakHeap()
		start, cpuStart := time.Now(), cpuSeconds()
		dispatched := runAllocateInspect(sc, tiers, configs, allocate, heapProfileAt(b, impl, i))
		elapsed += time.Since(start).Seconds()
		cpu += cpuSeconds() - cpuStart
		peak = max(peak, stopPeak())
		b.StopTimer()
		bound += int64(dispatched)
		builtinvgpu.VGPUEnable, builtinvgpu.NodeLockEnable = false, false
		if st != nil {
			st.Close()
		}
	}
	if bound == 0 {
		b.Fatalf("%s: nothing was allocated", impl)
	}
	b.ReportMetric(float64(bound)/elapsed, "pods/s")
	b.ReportMetric(elapsed/float64(bound)*1e6, "us/pod")
	b.ReportMetric(cpu/float64(bound)*1e6, "cpu-us/pod")
	b.ReportMetric(float64(timer.ns.Load())/float64(bound)/1e3, "cb-us/pod")
	b.ReportMetric(float64(timer.calls.Load())/float64(bound), "cb-calls/pod")
	b.ReportMetric(float64(bound)/float64(b.N), "allocated/op")
	b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MB")
}

// unthrottleBuiltin answers the built-in vGPU code's API calls in memory,
// without client-go's 5 QPS limit, so its CPU cost can be measured at
// scales where the throttled round trips would take hours. It returns the
// function that puts the previous client back.
func unthrottleBuiltin() func() {
	saved := volcano.BuiltinVGPUClient()
	c := fake.NewSimpleClientset()
	c.PrependReactor("patch", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetResource().Resource == "nodes" {
			return true, &v1.Node{}, nil
		}
		return true, &v1.Pod{}, nil
	})
	volcano.SetBuiltinVGPUClient(c)
	return func() { volcano.SetBuiltinVGPUClient(saved) }
}

// resetBuiltinVGPUMetrics empties the Prometheus gauges of Volcano's
// built-in vGPU code. That code runs in every NodeInfo Volcano builds, for
// every implementation (the cache's nodes and each session's snapshot):
// NewGPUDevices calls ResetDeviceMetrics per card, whose DeletePartialMatch
// scans every pod-per-card gauge the process holds, and AddResource adds one
// per allocated pod and card, with the same annotations ours writes. Left
// alone, the gauges of one run's 10,000 pods make the next run's cluster
// setup cost cards x pod-cards label matches (minutes at 5000 nodes, and
// the ledger benchmark's second run never ended). Each run starts as a
// fresh scheduler does.
func resetBuiltinVGPUMetrics() {
	for _, g := range []*prometheus.GaugeVec{builtinvgpu.VGPUDevicesSharedNumber, builtinvgpu.VGPUDevicesAllocatedMemory,
		builtinvgpu.VGPUDevicesAllocatedCores, builtinvgpu.VGPUDevicesMemoryTotal,
		builtinvgpu.VGPUPodMemoryAllocated, builtinvgpu.VGPUPodCoreAllocated} {
		g.Reset()
	}
}

// heapProfileAt returns, when BENCH_HEAPPROFILE names a file prefix, the
// inspection that writes a heap profile of the session after the allocate
// action and before it closes (<prefix>-<impl>.heap, of the first
// iteration), where everything the session and the plugin built is still
// held: the live heap's peak. It collects garbage first, so that the
// profile's inuse figures are the live objects; the run's times then
// include that collection, so a profiled run's speed is not reported.
// Without BENCH_HEAPPROFILE it returns nil.
func heapProfileAt(b *testing.B, impl string, iter int) func(*framework.Session) {
	prefix := os.Getenv("BENCH_HEAPPROFILE")
	if prefix == "" || iter > 0 {
		return nil
	}
	return func(*framework.Session) {
		goruntime.GC()
		f, err := os.Create(prefix + "-" + impl + ".heap")
		if err != nil {
			b.Fatalf("BENCH_HEAPPROFILE: %v", err)
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			b.Fatalf("BENCH_HEAPPROFILE: write %s: %v", f.Name(), err)
		}
		var m goruntime.MemStats
		goruntime.ReadMemStats(&m)
		b.ReportMetric(float64(m.HeapAlloc)/(1<<20), "live-heap-MB")
	}
}

// samplePeakHeap samples the heap in use every 5 ms until the returned
// function is called, which returns the largest sample.
func samplePeakHeap() func() uint64 {
	var peak uint64
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		var m goruntime.MemStats
		for {
			goruntime.ReadMemStats(&m)
			peak = max(peak, m.HeapAlloc)
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-finished
		return peak
	}
}

// BenchmarkVGPULedgerMemory measures the heap the ledger holds per GPU:
// nodes of 8 cards, each with four pods accounted, synced into a fresh
// ledger (Volcano's NodeInfos and pods are built before measuring).
func BenchmarkVGPULedgerMemory(b *testing.B) {
	nodes := 1000
	backends, err := registry.Build(pluginargs.Args{VGPUEnable: true}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	resetBuiltinVGPUMetrics()
	infos := make(map[string]*vcapi.NodeInfo, nodes)
	for n := 0; n < nodes; n++ {
		node := vgpuBenchNode(n)
		ni := vcapi.NewNodeInfo(node)
		for k := 0; k < 4; k++ {
			p := vgpuPod(fmt.Sprintf("n%d-p%d", n, k), "pg", 2, 8000, 20)
			p.Spec.NodeName, p.Status.Phase = node.Name, v1.PodRunning
			p.Annotations[vgpuproto.AnnotationIDs] = fmt.Sprintf("GPU-%04d-%d,NVIDIA,8000,20:GPU-%04d-%d,NVIDIA,8000,20:", n, 2*k, n, 2*k+1)
			if err := ni.AddTask(vcapi.NewTaskInfo(p)); err != nil {
				b.Fatal(err)
			}
		}
		infos[node.Name] = ni
	}
	b.ResetTimer()
	var perGPU float64
	for i := 0; i < b.N; i++ {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		l := nodestate.New(nil, bind.NewDecisions(nil))
		res := l.Sync(infos, backends)
		goruntime.GC()
		goruntime.ReadMemStats(&after)
		if res.Added != 4*nodes {
			b.Fatalf("accounted %d pods, want %d", res.Added, 4*nodes)
		}
		perGPU = float64(after.HeapAlloc-before.HeapAlloc) / float64(8*nodes)
		goruntime.KeepAlive(l)
	}
	b.ReportMetric(perGPU, "B/GPU")
}

// cpuSeconds is the process's user and system CPU time.
func cpuSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

// noopPlugin registers the extension points deviceshare registers and does
// nothing in them, so the framework's cost of calling a device plugin is
// in the baseline.
type noopPlugin struct{}

func (noopPlugin) Name() string { return PluginName }

func (noopPlugin) OnSessionOpen(ssn *framework.Session) {
	ssn.AddPredicateFn(PluginName, func(*vcapi.TaskInfo, *vcapi.NodeInfo) error { return nil })
	ssn.AddNodeOrderFn(PluginName, func(*vcapi.TaskInfo, *vcapi.NodeInfo) (float64, error) { return 0, nil })
	ssn.AddBatchNodeOrderFn(PluginName, func(*vcapi.TaskInfo, []*vcapi.NodeInfo) (map[string]float64, error) { return nil, nil })
	ssn.AddEventHandler(&framework.EventHandler{AllocateFunc: func(*framework.Event) {}, DeallocateFunc: func(*framework.Event) {}})
}

func (noopPlugin) OnSessionClose(*framework.Session) {}
