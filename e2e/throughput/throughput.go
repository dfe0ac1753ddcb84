//go:build e2e

// Package throughput measures scheduling end to end on the local control
// plane: simulated GPU nodes, each with a real node agent on the mock NVML
// and a fake kubelet, and a burst of vGPU Volcano Jobs. It reports the time
// from submission until every pod is bound, Running and admitted by its
// node agent (bind-phase success), and the API requests the scheduler and
// the node agents issued meanwhile (from the API server's audit log),
// including node PATCHes while the cluster sits idle afterwards. It runs
// our scheduler or Volcano v1.10.0's stock one with the same agents.
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

	"github.com/vgpushare/vshare/e2e/framework"
	vgpuproto "github.com/vgpushare/vshare/protocol/vgpu"
)

// Options configure Run.
type Options struct {
	// Nodes is the number of simulated DGX A100 nodes (8 cards each).
	Nodes int
	// Jobs and PodsPerJob shape the burst: Jobs gangs of PodsPerJob pods.
	Jobs, PodsPerJob int
	// Stock runs Volcano v1.10.0's own scheduler instead of ours.
	Stock bool
	// Idle is how long the cluster is watched after the burst, to count
	// the node PATCHes nothing but time causes.
	Idle time.Duration
	// Timeout bounds the wait for the burst.
	Timeout time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// Result is one run's measurements.
type Result struct {
	Scheduler string
	Nodes     int
	Pods      int
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
}

const namespace = "burst"

// Run brings a cluster up, runs the burst, measures, and tears it down.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Log == nil {
		o.Log = io.Discard
	}
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
	c, err := framework.Start(ctx, framework.Options{Binaries: bins, Log: o.Log, Audit: true})
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
	res := &Result{Scheduler: "ours", Nodes: o.Nodes, Pods: o.Jobs * o.PodsPerJob}
	if o.Stock {
		res.Scheduler = "stock v1.10.0"
		c.StopScheduler()
		if err = c.StartSchedulerWith(ctx, framework.SchedulerSpec{Binary: framework.BinStockScheduler}); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	// Volcano's stock scheduler does not sign its allocations.
	if err = addNodes(ctx, c, o.Nodes, framework.AgentSpec{Unsigned: o.Stock}); err != nil {
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
	tr := newTracker(c, res.Pods)
	stop := make(chan struct{})
	defer close(stop)
	if err = tr.start(stop); err != nil {
		return nil, err
	}
	t0 := time.Now()
	for j := range o.Jobs {
		if err = c.CreateJob(ctx, framework.VGPUJob(namespace, fmt.Sprintf("job-%03d", j), task(j, o.PodsPerJob))); err != nil {
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
// of memory and cores.
func task(j, pods int) framework.VGPUTask {
	mems := []int64{4000, 8000, 10000, 16000, 20000}
	cores := []int64{10, 20, 25, 30, 50}
	t := framework.VGPUTask{Name: "w", Replicas: int32(pods), VGPUs: 1, MemoryMiB: mems[j%len(mems)], Cores: cores[j%len(cores)]}
	if j%5 == 4 {
		t.VGPUs = 2
	}
	return t
}

// addNodes adds the GPU nodes eight at a time.
func addNodes(ctx context.Context, c *framework.Cluster, n int, spec framework.AgentSpec) error {
	sem := make(chan struct{}, 8)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.AddGPUNodeWith(ctx, fmt.Sprintf("gpu-%03d", i), "dgxa100", spec); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	return <-errs
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

// tracker records when each pod was first seen bound, Running and
// admitted (bind-phase success).
type tracker struct {
	c     *framework.Cluster
	want  int
	mu    sync.Mutex
	bound map[string]time.Time
	run   map[string]time.Time
	adm   map[string]time.Time
}

func newTracker(c *framework.Cluster, want int) *tracker {
	return &tracker{c: c, want: want, bound: map[string]time.Time{}, run: map[string]time.Time{}, adm: map[string]time.Time{}}
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
		mark(tr.bound, p.Spec.NodeName != "")
		mark(tr.run, p.Status.Phase == v1.PodRunning)
		mark(tr.adm, p.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseSuccess)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: see, UpdateFunc: func(_, o any) { see(o) }}); err != nil {
		return err
	}
	f.Start(stop)
	return nil
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
	if len(ds) == 0 {
		return 0, 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2], ds[(len(ds)*99)/100]
}

// Report writes a comparison table of results.
func Report(w io.Writer, rs []*Result) {
	fmt.Fprintf(w, "| scheduler | nodes | pods | all bound | all Running | all admitted | p50 / p99 admitted | scheduler requests per bound pod | agent requests per bound pod | node PATCHes per bound pod (scheduler, agents) | idle node PATCHes/min |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rs {
		var sched, agent, schedNode, agentNode int
		for k, n := range r.Requests {
			switch {
			case strings.HasPrefix(k.Client, "vc-scheduler"):
				sched += n
				if k.Verb == "patch" && strings.HasPrefix(k.Resource, "nodes") {
					schedNode += n
				}
			case k.Client == "vgpu-device-plugin":
				agent += n
				if k.Verb == "patch" && strings.HasPrefix(k.Resource, "nodes") {
					agentNode += n
				}
			}
		}
		var idle float64
		for _, n := range r.IdleNodePatches {
			idle += n
		}
		p := float64(max(r.BoundPods, 1))
		pods := fmt.Sprint(r.Pods)
		if r.Incomplete {
			pods = fmt.Sprintf("%d (only %d bound, %d admitted before the timeout)", r.Pods, r.BoundPods, r.AdmittedPods)
		}
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %s | %s / %s | %.2f | %.2f | %.2f, %.2f | %.0f |\n",
			r.Scheduler, r.Nodes, pods, r.Bound.Round(time.Millisecond), r.Running.Round(time.Millisecond),
			r.Admitted.Round(time.Millisecond), r.P50.Round(time.Millisecond), r.P99.Round(time.Millisecond),
			float64(sched)/p, float64(agent)/p, float64(schedNode)/p, float64(agentNode)/p, idle)
	}
}

// Details writes every client's requests by verb and resource.
func Details(w io.Writer, r *Result) {
	keys := make([]framework.AuditKey, 0, len(r.Requests))
	for k := range r.Requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Client != b.Client {
			return a.Client < b.Client
		}
		if a.Verb != b.Verb {
			return a.Verb < b.Verb
		}
		return a.Resource < b.Resource
	})
	fmt.Fprintf(w, "\n%s: requests during the burst\n", r.Scheduler)
	for _, k := range keys {
		fmt.Fprintf(w, "  %-26s %-7s %-22s %d\n", k.Client, k.Verb, k.Resource, r.Requests[k])
	}
	fmt.Fprintf(w, "  idle node PATCHes per minute by client: %v\n", r.IdleNodePatches)
}
