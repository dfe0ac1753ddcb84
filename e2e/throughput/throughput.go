//go:build e2e

// Package throughput measures scheduling end to end on the local control
// plane: simulated GPU nodes, each with a real node agent on the mock NVML
// and a fake kubelet, and a burst of Volcano Jobs (gangs). It reports the
// time from submission until every pod is bound, Running and admitted, and
// the API requests the scheduler and the node agents issued meanwhile (from
// the API server's audit log), including node PATCHes while the cluster sits
// idle afterwards.
//
// The schedulers, each on a fresh cluster of the same shape:
//
//   - floor: our scheduler, the same Jobs, gangs and queue, but pods with no
//     device request. No node agent takes part in a pod's admission, so
//     "admitted" is Running (kwok's pod-ready stage, what the kubelet side
//     gives); this is the cost of the same Volcano and cluster with no
//     device work at all.
//   - ours: our scheduler, vGPU pods; admitted is the node agent's
//     bind-phase success, written when the (fake) kubelet's Allocate for
//     the pod's last container is served.
//   - ours-spread: ours with deviceshare.SchedulePolicy: spread instead of
//     the default binpack, so a node gets about as many pods as the
//     floor's; a node agent serves its pods one at a time, so with a slow
//     agent the busiest node's pod count bounds the burst.
//   - stock: Volcano v1.10.0's own scheduler with its built-in vGPU code and
//     the same agents (unsigned allocations), admitted as for ours.
//   - ours-alt: ours run by another build of our scheduler
//     (Options.AltScheduler), for example one built with an older binding
//     rule (hack/bench-rules.sh), so that two builds are compared on the
//     same machine in one invocation.
//   - ours-upstream: our scheduler, vGPU pods, on nodes registered as
//     volcano-vgpu-device-plugin registers them, served by a stand-in for
//     upstream's agent (framework.UpstreamAgents: each node's oldest
//     pending pod, one at a time, looked for every 100 ms); admitted is
//     the stand-in's bind-phase success.
package throughput

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Options configure Run.
type Options struct {
	// Nodes is the number of simulated DGX A100 nodes (8 cards each).
	Nodes int
	// Jobs and PodsPerJob shape the burst: Jobs gangs of PodsPerJob pods.
	Jobs, PodsPerJob int
	// Scheduler is one of Schedulers.
	Scheduler string
	// Idle is how long the cluster is watched after the burst, to count
	// the node PATCHes nothing but time causes.
	Idle time.Duration
	// Timeout bounds the wait for the burst.
	Timeout time.Duration
	// AltScheduler is the absolute path of the scheduler executable the
	// ours-alt run uses (framework.SchedulerSpec.Path).
	AltScheduler string
	// Round numbers the run when the same runs are repeated (1 when not).
	Round int
	// AgentDelay is added before every Allocate the fake kubelets call
	// (FakeKubelet.SetAllocateDelay): a node agent whose round trip is
	// that much slower. The floor's pods call none.
	AgentDelay time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// Result is one run's measurements.
type Result struct {
	Scheduler string
	Nodes     int
	Pods      int
	// Round is Options.Round: a repeated run's ratio is taken against its
	// own round's floor.
	Round int
	// AgentDelay is Options.AgentDelay.
	AgentDelay time.Duration
	// Bound, Running and Admitted are the times from the first submission
	// until the last pod was bound, Running, and admitted by its agent.
	Bound, Running, Admitted time.Duration
	// P50 and P99 are per-pod submission-to-admitted latencies.
	P50, P99 time.Duration
	// Requests are API requests during the burst, by client and verb
	// resource; IdleNodePatches node PATCHes (any client) per minute while
	// idle.
	Requests        map[framework.AuditKey]int
	IdleNodePatches map[string]float64
	// Incomplete is set when the burst did not finish within the timeout;
	// the times are then those of the pods that did.
	Incomplete                           bool
	BoundPods, RunningPods, AdmittedPods int
	// Timeout is the bound the run had.
	Timeout time.Duration
	// Breakdown says where the time went, from the per-pod timestamps.
	Breakdown Breakdown
	// Metrics are the scheduler's deviceshare counters at the end of the
	// burst (ours and floor): name{labels} -> value.
	Metrics map[string]float64
	// CPU is the CPU time each component used during the burst (the
	// harness's children summed by kind, and the harness itself).
	CPU map[string]time.Duration
}

// The schedulers Run knows.
const (
	SchedulerFloor = "floor"
	SchedulerOurs  = "ours"
	SchedulerStock = "stock"
	// SchedulerOursUpstream is ours on upstream agents' nodes (stand-ins).
	SchedulerOursUpstream = "ours-upstream"
	// SchedulerOursSpread is ours with deviceshare.SchedulePolicy: spread
	// (the default is binpack): the floor's pods ask for no device, tie on
	// every node and spread, so this run separates what placement costs a
	// node's serial admissions from what the agent costs.
	SchedulerOursSpread = "ours-spread"
	// SchedulerOursAlt is ours run by Options.AltScheduler.
	SchedulerOursAlt = "ours-alt"
)

// Schedulers are the accepted Options.Scheduler values, in report order.
var Schedulers = []string{SchedulerFloor, SchedulerOurs, SchedulerOursSpread, SchedulerOursAlt, SchedulerStock, SchedulerOursUpstream}

const namespace = "burst"

// Run brings a cluster up, runs the burst, measures, and tears it down.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
	switch o.Scheduler {
	case SchedulerFloor, SchedulerOurs, SchedulerOursSpread, SchedulerStock, SchedulerOursUpstream:
	case SchedulerOursAlt:
		if o.AltScheduler == "" {
			return nil, fmt.Errorf("scheduler %q: needs the executable to run (Options.AltScheduler, --alt-scheduler)", o.Scheduler)
		}
	default:
		return nil, fmt.Errorf("scheduler %q: want one of %s", o.Scheduler, strings.Join(Schedulers, ", "))
	}
	stock := o.Scheduler == SchedulerStock
	if b, err := os.ReadFile("/proc/sys/fs/inotify/max_user_instances"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n < o.Nodes+64 {
			fmt.Fprintf(o.Log, "throughput: fs.inotify.max_user_instances is %d; %d agents fall back to polling and may leave "+
				"none for the other processes (raise it: sysctl fs.inotify.max_user_instances=%d)\n", n, o.Nodes, 4*(o.Nodes+64))
		}
	}
	bins, err := framework.EnsureBinaries(ctx, o.Log)
	if err != nil {
		return nil, err
	}
	var conf string // the cluster's default
	if o.Scheduler == SchedulerOursSpread {
		conf = framework.DefaultSchedulerConf + "      " + pluginargs.ArgSchedulePolicy + ": " + device.PolicySpread + "\n"
	}
	c, err := framework.Start(ctx, framework.Options{Binaries: bins, Log: o.Log, Audit: true, SchedulerConf: conf})
	if err != nil {
		return nil, err
	}
	defer func() {
		c.Stop()
		if err == nil {
			_ = c.RemoveWorkDir()
		} else {
			fmt.Fprintf(o.Log, "throughput: logs kept in %s\n", c.WorkDir)
		}
	}()
	res := &Result{Scheduler: o.Scheduler, Nodes: o.Nodes, Pods: o.Jobs * o.PodsPerJob, Timeout: o.Timeout, AgentDelay: o.AgentDelay, Round: max(o.Round, 1)}
	switch {
	case stock:
		c.StopScheduler()
		if err = c.StartSchedulerWith(ctx, framework.SchedulerSpec{Binary: framework.BinStockScheduler}); err != nil {
			return nil, err
		}
	case o.Scheduler == SchedulerOursAlt:
		c.StopScheduler()
		if err = c.StartSchedulerWith(ctx, framework.SchedulerSpec{Path: o.AltScheduler}); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	if o.Scheduler == SchedulerOursUpstream {
		ua, uerr := c.StartUpstreamAgents(ctx, o.AgentDelay)
		if uerr != nil {
			return nil, uerr
		}
		defer ua.Stop()
		err = addUpstreamNodes(ctx, ua, o.Nodes)
	} else {
		// Volcano's stock scheduler does not sign its allocations.
		err = addNodes(ctx, c, o.Nodes, framework.AgentSpec{Unsigned: stock}, o.AgentDelay)
	}
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Log, "throughput: %d nodes up in %s\n", o.Nodes, time.Since(start).Round(time.Second))
	if err = c.CreateNamespace(ctx, namespace); err != nil {
		return nil, err
	}
	before, err := c.AuditCounts()
	if err != nil {
		return nil, err
	}
	tr := newTracker(c, res.Pods, o.Scheduler == SchedulerFloor)
	stop := make(chan struct{})
	defer close(stop)
	if err = tr.start(stop); err != nil {
		return nil, err
	}
	cpuBefore, err := c.CPUByComponent()
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	for j := range o.Jobs {
		if err = c.CreateJob(ctx, framework.VGPUJob(namespace, fmt.Sprintf("job-%03d", j), task(j, o.PodsPerJob, o.Scheduler == SchedulerFloor))); err != nil {
			return nil, err
		}
	}
	fmt.Fprintf(o.Log, "throughput: %d Jobs submitted in %s\n", o.Jobs, time.Since(t0).Round(time.Millisecond))
	if werr := tr.wait(ctx, o.Timeout, o.Log); werr != nil {
		if ctx.Err() != nil {
			return nil, werr
		}
		fmt.Fprintf(o.Log, "throughput: %v; reporting what finished\n", werr)
		res.Incomplete = true
	}
	res.BoundPods, res.RunningPods, res.AdmittedPods = tr.counts()
	res.Bound, res.Running, res.Admitted = tr.last(t0)
	res.P50, res.P99 = tr.percentiles(t0)
	res.Breakdown = tr.breakdown(t0)
	cpuAfter, err := c.CPUByComponent()
	if err != nil {
		return nil, err
	}
	res.CPU = cpuDiff(cpuAfter, cpuBefore)
	if !stock {
		if res.Metrics, err = deviceshareMetrics(ctx, c); err != nil {
			fmt.Fprintf(o.Log, "throughput: %v\n", err)
			err = nil
		}
	}
	after, err := c.AuditCounts()
	if err != nil {
		return nil, err
	}
	res.Requests = diff(after, before)
	time.Sleep(o.Idle)
	idle, err := c.AuditCounts()
	if err != nil {
		return nil, err
	}
	res.IdleNodePatches = map[string]float64{}
	for k, n := range diff(idle, after) {
		if k.Verb == "patch" && strings.HasPrefix(k.Resource, "nodes") {
			res.IdleNodePatches[k.Client] += float64(n) / o.Idle.Minutes()
		}
	}
	return res, nil
}

// task is job j's pods: one or (every fifth job) two cards with a spread
// of memory and cores; with floor, the same pods asking for no device.
func task(j, pods int, floor bool) framework.VGPUTask {
	if floor {
		return framework.VGPUTask{Name: "w", Replicas: int32(pods)}
	}
	mems := []int64{4000, 8000, 10000, 16000, 20000}
	cores := []int64{10, 20, 25, 30, 50}
	t := framework.VGPUTask{Name: "w", Replicas: int32(pods), VGPUs: 1, MemoryMiB: mems[j%len(mems)], Cores: cores[j%len(cores)]}
	if j%5 == 4 {
		t.VGPUs = 2
	}
	return t
}

// deviceshareMetrics scrapes the scheduler's volcano_deviceshare_* series,
// less the per-node and per-card ones.
func deviceshareMetrics(ctx context.Context, c *framework.Cluster) (map[string]float64, error) {
	fams, err := c.SchedulerMetrics(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	for name, f := range fams {
		if !strings.HasPrefix(name, "volcano_deviceshare_") {
			continue
		}
		for _, m := range f.GetMetric() {
			var v float64
			switch {
			case m.GetCounter() != nil:
				v = m.GetCounter().GetValue()
			case m.GetGauge() != nil:
				v = m.GetGauge().GetValue()
			default:
				continue
			}
			var labels []string
			perObject := false
			for _, l := range m.GetLabel() {
				perObject = perObject || l.GetName() == "node" || l.GetName() == "card"
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			if perObject {
				continue // per-node and per-card gauges: thousands of lines
			}
			key := name
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			out[key] = v
		}
	}
	return out, nil
}

// addNodes adds the GPU nodes eight at a time, their kubelets calling
// Allocate delay late.
func addNodes(ctx context.Context, c *framework.Cluster, n int, spec framework.AgentSpec, delay time.Duration) error {
	return eightAtATime(n, func(i int) error {
		node, err := c.AddGPUNodeWith(ctx, fmt.Sprintf("gpu-%03d", i), "dgxa100", spec)
		if err != nil {
			return err
		}
		node.Kubelet.SetAllocateDelay(delay)
		return nil
	})
}

// addUpstreamNodes adds n nodes of eight 40 GiB cards (as the mock DGX
// A100's) served by the upstream stand-in, eight at a time.
func addUpstreamNodes(ctx context.Context, ua *framework.UpstreamAgents, n int) error {
	return eightAtATime(n, func(i int) error {
		return ua.AddUpstreamNode(ctx, fmt.Sprintf("gpu-%03d", i), 8, 40960)
	})
}

// eightAtATime runs add(0..n-1) with eight in flight and returns the first
// error.
func eightAtATime(n int, add func(i int) error) error {
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if err := add(i); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// cpuDiff is the CPU each component used between two readings; a
// component whose processes restarted in between (less CPU after than
// before) counts what the new ones used.
func cpuDiff(after, before map[string]time.Duration) map[string]time.Duration {
	out := make(map[string]time.Duration, len(after))
	for k, a := range after {
		if d := a - before[k]; d >= 0 {
			out[k] = d
		} else {
			out[k] = a
		}
	}
	return out
}

func diff(after, before map[framework.AuditKey]int) map[framework.AuditKey]int {
	out := make(map[framework.AuditKey]int)
	for k, n := range after {
		if d := n - before[k]; d > 0 {
			out[k] = d
		}
	}
	return out
}

// tracker records when each pod was first seen created, bound, Running and
// admitted (bind-phase success; Running for the floor, whose pods no agent
// admits), and the node it was bound to.
type tracker struct {
	c     *framework.Cluster
	want  int
	floor bool
	mu    sync.Mutex
	made  map[string]time.Time
	bound map[string]time.Time
	run   map[string]time.Time
	adm   map[string]time.Time
	node  map[string]string
}

func newTracker(c *framework.Cluster, want int, floor bool) *tracker {
	return &tracker{c: c, want: want, floor: floor, made: map[string]time.Time{}, bound: map[string]time.Time{},
		run: map[string]time.Time{}, adm: map[string]time.Time{}, node: map[string]string{}}
}

func (tr *tracker) start(stop <-chan struct{}) error {
	f := informers.NewSharedInformerFactoryWithOptions(tr.c.Kube, 0, informers.WithNamespace(namespace))
	inf := f.Core().V1().Pods().Informer()
	see := func(obj any) {
		p, ok := obj.(*v1.Pod)
		if !ok {
			return
		}
		now := time.Now()
		tr.mu.Lock()
		defer tr.mu.Unlock()
		mark := func(m map[string]time.Time, cond bool) {
			if _, seen := m[p.Name]; cond && !seen {
				m[p.Name] = now
			}
		}
		mark(tr.made, true)
		mark(tr.bound, p.Spec.NodeName != "")
		if p.Spec.NodeName != "" {
			tr.node[p.Name] = p.Spec.NodeName
		}
		running := p.Status.Phase == v1.PodRunning
		mark(tr.run, running)
		if tr.floor {
			mark(tr.adm, running)
		} else {
			mark(tr.adm, p.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseSuccess)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return err
	}
	f.Start(stop)
	return nil
}

// Breakdown splits the burst's time by stage, from the tracker's
// timestamps (medians over pods, seconds since the first submission where
// it says so).
type Breakdown struct {
	// Created is when the last pod was created (Volcano's job controller).
	Created time.Duration
	// CreatedToBound and BoundToAdmitted are medians and p99s per pod.
	CreatedToBoundP50, CreatedToBoundP99   time.Duration
	BoundToAdmittedP50, BoundToAdmittedP99 time.Duration
	// AdmittedToNextBoundP50 is, on each node, the time from one pod's
	// admission to the next pod's bind there (the scheduler seeing the
	// agent's answer and binding), median over such pairs.
	AdmittedToNextBoundP50 time.Duration
	// Overlapped counts pods bound to a node while the node's previous pod
	// there was not yet admitted: 0 under the one-pending-pod rule unless
	// the previous pod's allocation failed (no longer pending, never
	// admitted) or, for the floor, always possible.
	Overlapped int
	// NodeChainP50, NodeChainMax: per node, first bind to last admission.
	NodeChainP50, NodeChainMax time.Duration
	// NodesUsed is how many nodes got pods; PodsPerNodeP50 and
	// PodsPerNodeMax how many they got; LongestChainPods how many the node
	// with the longest chain got.
	NodesUsed, PodsPerNodeP50, PodsPerNodeMax, LongestChainPods int
	// FirstBound is when the first pod was bound.
	FirstBound time.Duration
	// BoundBy50 is when half the pods were bound.
	BoundBy50 time.Duration
}

func (tr *tracker) breakdown(t0 time.Time) Breakdown {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var b Breakdown
	b.Created = latest(tr.made, t0)
	var c2b, b2a, a2n, chains, boundAt []time.Duration
	byNode := map[string][]string{}
	var perNode []int
	for name, bt := range tr.bound {
		boundAt = append(boundAt, bt.Sub(t0))
		if mt, ok := tr.made[name]; ok {
			c2b = append(c2b, bt.Sub(mt))
		}
		if at, ok := tr.adm[name]; ok {
			b2a = append(b2a, at.Sub(bt))
		}
		byNode[tr.node[name]] = append(byNode[tr.node[name]], name)
	}
	for _, pods := range byNode {
		sort.Slice(pods, func(i, j int) bool { return tr.bound[pods[i]].Before(tr.bound[pods[j]]) })
		var end time.Time
		for i, p := range pods {
			if at, ok := tr.adm[p]; ok && at.After(end) {
				end = at
			}
			if i == 0 {
				continue
			}
			prev := tr.adm[pods[i-1]]
			if prev.IsZero() || tr.bound[p].Before(prev) {
				b.Overlapped++
			} else {
				a2n = append(a2n, tr.bound[p].Sub(prev))
			}
		}
		if !end.IsZero() {
			d := end.Sub(tr.bound[pods[0]])
			chains = append(chains, d)
			if d >= b.NodeChainMax {
				b.NodeChainMax, b.LongestChainPods = d, len(pods)
			}
		}
		perNode = append(perNode, len(pods))
	}
	sort.Ints(perNode)
	if b.NodesUsed = len(perNode); b.NodesUsed > 0 {
		b.PodsPerNodeP50, b.PodsPerNodeMax = perNode[len(perNode)/2], perNode[len(perNode)-1]
	}
	b.CreatedToBoundP50, b.CreatedToBoundP99 = pct(c2b)
	b.BoundToAdmittedP50, b.BoundToAdmittedP99 = pct(b2a)
	b.AdmittedToNextBoundP50, _ = pct(a2n)
	b.NodeChainP50, _ = pct(chains)
	sortDurations(boundAt)
	if len(boundAt) > 0 {
		b.FirstBound = boundAt[0]
		b.BoundBy50 = boundAt[len(boundAt)/2]
	}
	return b
}

func sortDurations(ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
}

// pct returns the median and the 99th percentile of ds (sorting it).
func pct(ds []time.Duration) (p50, p99 time.Duration) {
	if len(ds) == 0 {
		return 0, 0
	}
	sortDurations(ds)
	return ds[len(ds)/2], ds[(len(ds)*99)/100]
}

func (tr *tracker) wait(ctx context.Context, timeout time.Duration, log io.Writer) error {
	deadline := time.Now().Add(timeout)
	next := time.Now()
	for {
		tr.mu.Lock()
		b, r, a := len(tr.bound), len(tr.run), len(tr.adm)
		tr.mu.Unlock()
		if a >= tr.want && r >= tr.want {
			return nil
		}
		if time.Now().After(next) {
			fmt.Fprintf(log, "throughput: %d/%d bound, %d Running, %d admitted\n", b, tr.want, r, a)
			next = time.Now().Add(10 * time.Second)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("after %s: %d/%d pods bound, %d Running, %d admitted", timeout, b, tr.want, r, a)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func latest(m map[string]time.Time, t0 time.Time) time.Duration {
	var last time.Duration
	for _, t := range m {
		last = max(last, t.Sub(t0))
	}
	return last
}

func (tr *tracker) counts() (bound, running, admitted int) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return len(tr.bound), len(tr.run), len(tr.adm)
}

func (tr *tracker) last(t0 time.Time) (bound, running, admitted time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return latest(tr.bound, t0), latest(tr.run, t0), latest(tr.adm, t0)
}

func (tr *tracker) percentiles(t0 time.Time) (p50, p99 time.Duration) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	var ds []time.Duration
	for _, t := range tr.adm {
		ds = append(ds, t.Sub(t0))
	}
	return pct(ds)
}
