//go:build e2e

// Package benchapi runs the in-process vGPU benchmark
// (deviceshare.BenchmarkAllocateVGPU) with Volcano's built-in vGPU as it
// ships: its package-level client limited to client-go's default 5
// requests per second and talking to a real kube-apiserver. It starts only
// etcd and kube-apiserver (framework.StartAPIServer), creates there the
// nodes and pods the benchmark's in-memory cluster holds (the built-in
// PATCHes each allocated pod, and would PATCH nodes whose handshake is
// stale), writes a kubeconfig and runs `go test -bench` with
// BENCH_KUBECONFIG pointing at it. `make bench` runs it (hack/bench.sh,
// command e2e/cmd/benchapi).
package benchapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vgpushare/vshare/e2e/framework"
)

// The names the benchmark's in-memory cluster uses (deviceshare's
// vgpuBenchNode, vgpuBenchPods and testNamespace): the objects created in
// the API server must carry the same ones, or the built-in's PATCHes fail.
const (
	namespace  = "team-a"
	nodeFormat = "n%04d"
	podFormat  = "p%d"
)

// Options configure Run.
type Options struct {
	// Nodes are the cluster sizes, one benchmark each (BENCH_NODES).
	Nodes []int
	// Pods is the number of pods per session (BENCH_PODS).
	Pods int
	// Impls are the benchmark's implementations (BENCH_IMPLS), e.g.
	// builtin (throttled, against the API server) and ours.
	Impls []string
	// Count is go test's -count.
	Count int
	// Out receives go test's output; Log the progress lines.
	Out, Log io.Writer
}

// Validate names the first bad field.
func (o Options) Validate() error {
	if len(o.Nodes) == 0 {
		return errors.New("--nodes: empty; want comma-separated node counts, e.g. 1000,5000")
	}
	for _, n := range o.Nodes {
		if n < 1 || n > 9999 {
			return fmt.Errorf("--nodes: %d: want 1 to 9999 (the benchmark names nodes n0000 to n9999)", n)
		}
	}
	if o.Pods < 1 {
		return fmt.Errorf("--pods: %d: want at least 1", o.Pods)
	}
	if o.Count < 1 {
		return fmt.Errorf("--count: %d: want at least 1", o.Count)
	}
	for _, im := range o.Impls {
		switch im {
		case "builtin", "builtin-unthrottled", "noop", "ours", "ours-fragment":
		default:
			return fmt.Errorf("--impls: %q: want builtin, builtin-unthrottled, noop, ours or ours-fragment", im)
		}
	}
	return nil
}

// Run starts the API server, fills it and runs the benchmark.
func Run(ctx context.Context, o Options) error {
	if err := o.Validate(); err != nil {
		return err
	}
	bins, err := framework.EnsureAPIServerBinaries(ctx, o.Log)
	if err != nil {
		return err
	}
	c, err := framework.StartAPIServer(ctx, framework.Options{Binaries: bins, Log: o.Log})
	if err != nil {
		return err
	}
	defer func() {
		c.Stop()
		_ = c.RemoveWorkDir()
	}()
	maxNodes := 0
	for _, n := range o.Nodes {
		maxNodes = max(maxNodes, n)
	}
	// The harness's client is limited to 200 requests/s; filling 5000
	// nodes goes faster without that limit.
	cfg := rest.CopyConfig(c.Config)
	cfg.QPS, cfg.Burst = 5000, 5000
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("kube client: %w", err)
	}
	start := time.Now()
	if err := fill(ctx, kube, maxNodes, o.Pods); err != nil {
		return err
	}
	fmt.Fprintf(o.Log, "benchapi: %d nodes and %d pods created in the API server in %s\n",
		maxNodes, o.Pods, time.Since(start).Round(time.Millisecond))
	root, err := framework.ModuleRoot()
	if err != nil {
		return err
	}
	nodes := make([]string, len(o.Nodes))
	for i, n := range o.Nodes {
		nodes[i] = strconv.Itoa(n)
	}
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", "BenchmarkAllocateVGPU$",
		"-benchtime", "1x", "-count", strconv.Itoa(o.Count), "-timeout", "0", "./deviceshare/")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "BENCH_KUBECONFIG="+c.Kubeconfig, "BENCH_NODES="+strings.Join(nodes, ","),
		"BENCH_PODS="+strconv.Itoa(o.Pods), "BENCH_IMPLS="+strings.Join(o.Impls, ","))
	cmd.Stdout, cmd.Stderr = o.Out, o.Log
	fmt.Fprintf(o.Log, "benchapi: BENCH_NODES=%s BENCH_PODS=%d BENCH_IMPLS=%s %s\n",
		strings.Join(nodes, ","), o.Pods, strings.Join(o.Impls, ","), strings.Join(cmd.Args, " "))
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go test -bench BenchmarkAllocateVGPU: %w", err)
	}
	return nil
}

// fill creates the namespace, nodes n0000.. and pods p0.. on 16 workers.
func fill(ctx context.Context, kube kubernetes.Interface, nodes, pods int) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &v1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create namespace %s: %w", namespace, err)
	}
	jobs := make(chan func() error)
	errs := make(chan error, 1)
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range jobs {
				if err := job(); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	send := func(job func() error) bool {
		select {
		case jobs <- job:
			return true
		case err := <-errs:
			errs <- err
			return false
		}
	}
	for i := 0; i < nodes; i++ {
		name := fmt.Sprintf(nodeFormat, i)
		if !send(func() error { return create(ctx, kube, node(name)) }) {
			break
		}
	}
	for i := 0; i < pods; i++ {
		name := fmt.Sprintf(podFormat, i)
		if !send(func() error { return create(ctx, kube, pod(name)) }) {
			break
		}
	}
	close(jobs)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func create(ctx context.Context, kube kubernetes.Interface, obj any) error {
	var err error
	switch o := obj.(type) {
	case *v1.Node:
		_, err = kube.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create node %s: %w", o.Name, err)
		}
	case *v1.Pod:
		_, err = kube.CoreV1().Pods(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create pod %s/%s: %w", o.Namespace, o.Name, err)
		}
	}
	return nil
}

// node is a bare node: the built-in only PATCHes its annotations.
func node(name string) *v1.Node {
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// pod is a pending pod nothing schedules (no scheduler runs): the built-in
// PATCHes its annotations when it allocates cards to it.
func pod(name string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1.PodSpec{
			SchedulerName: "volcano",
			Containers:    []v1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.9"}},
		},
	}
}
