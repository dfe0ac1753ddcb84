//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/e2e/runc"
	"github.com/vgpushare/vshare/internal/testroot"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// nodeSide is one node's fake driver and runc, started for the node-side
// tests; the card they pin their pods to, and its index in NVML order.
type nodeSide struct {
	*framework.NodeSide
	card string
	dev  int
}

// startNodeSide prepares gpu-node-0 to run containers (framework/nodeside.go).
func startNodeSide(ctx context.Context, t *testing.T) *nodeSide {
	t.Helper()
	testroot.Require(t, "starting containers with runc")
	arts, err := framework.BuildNodeSide(ctx, filepath.Join(cluster.WorkDir, "nodeside"))
	if err != nil {
		t.Fatal(err)
	}
	node := cluster.Node(gpuNodes[0])
	ns, err := cluster.StartNodeSide(ctx, node, arts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ns.Stop)
	// The last card of the node: the other tests place on the first ones.
	st := ns.Driver.Stats()
	dev := len(st.Devices) - 1
	return &nodeSide{NodeSide: ns, card: st.Devices[dev].UUID, dev: dev}
}

// pinned is a one-vGPU task on the node side's card.
func (s *nodeSide) pinned(name string, memMiB, cores int64) framework.VGPUTask {
	return framework.VGPUTask{Name: name, Replicas: 1, VGPUs: 1, MemoryMiB: memMiB, Cores: cores,
		Annotations:  map[string]string{"volcano.sh/vgpu-use-gpuuuid": s.card},
		NodeSelector: map[string]string{"kubernetes.io/hostname": s.Node.Name}}
}

// runJob creates the job, waits until it runs and returns its pods by task.
func runJob(ctx context.Context, t *testing.T, ns, name string, tasks ...framework.VGPUTask) map[string]v1.Pod {
	t.Helper()
	return cluster.RunJob(ctx, t, framework.VGPUJob(ns, name, tasks...))
}

// start runs the pod's container from the agent's Allocate answer.
func (s *nodeSide) start(ctx context.Context, t *testing.T, pod v1.Pod, args ...string) *runc.Container {
	t.Helper()
	alloc, err := s.Allocation(ctx, pod.UID)
	if err != nil {
		t.Fatal(err)
	}
	id := strings.ReplaceAll(pod.Name, ".", "-")
	c, err := s.Runtime.Start(ctx, s.ContainerSpec(id, alloc, args...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// output waits until the container printed key=value and returns value; a
// container that exits first fails the test at once, with its output.
func output(ctx context.Context, t *testing.T, c *runc.Container, key string) string {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		for _, line := range strings.Split(c.Stdout(), "\n") {
			if v, ok := strings.CutPrefix(line, key+"="); ok {
				return v
			}
		}
		select {
		case <-c.Done():
			t.Fatalf("container %s exited before printing %s; stdout:\n%s\nstderr:\n%s", c.ID, key, c.Stdout(), c.Stderr())
		case <-ctx.Done():
			t.Fatalf("container %s: %v", c.ID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("container %s did not print %s in a minute; stdout:\n%s\nstderr:\n%s", c.ID, key, c.Stdout(), c.Stderr())
		}
	}
}

func atoi(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		t.Fatalf("number %q: %v", s, err)
	}
	return n
}

// TestNodeSideInContainers: from the kubelet's Allocate to processes under
// runc, judged by the fake driver's own accounting (never libvgpu's).
func TestNodeSideInContainers(t *testing.T) {
	const ns = "node-side"
	ctx := setup(t, ns, 10*time.Minute)
	s := startNodeSide(ctx, t)
	t.Run("two containers share a card, each within its limit", func(t *testing.T) { s.memory(ctx, t, ns) })
	t.Run("processes of one container share its limit", func(t *testing.T) { s.processes(ctx, t, ns) })
	t.Run("the container sees its share in NVML", func(t *testing.T) { s.nvmlView(ctx, t, ns) })
	for _, limit := range []int64{10, 30, 50, 90} {
		t.Run(fmt.Sprintf("SM share %d%% beside a busy neighbour", limit), func(t *testing.T) { s.smShare(ctx, t, ns, limit) })
	}
	t.Run("a neighbour's arrival throttles a container that ran alone", func(t *testing.T) { s.arrival(ctx, t, ns) })
	t.Run("the agent's exporter reports the containers", func(t *testing.T) { s.exporter(ctx, t, ns) })
	t.Run("a refused allocation gets no device", func(t *testing.T) { s.refused(ctx, t, ns) })
}

func (s *nodeSide) memory(ctx context.Context, t *testing.T, ns string) {
	pods := runJob(ctx, t, ns, "mem", s.pinned("a", 2000, 0), s.pinned("b", 3000, 0))
	for task, limit := range map[string]int64{"a": 2000, "b": 3000} {
		c := s.start(ctx, t, pods[task], "fill", "64")
		got, refused := atoi(t, output(ctx, t, c, "allocated_mib")), output(ctx, t, c, "refused")
		if refused != "2" {
			t.Errorf("container %s: the allocation past its limit returned %s, want CUDA_ERROR_OUT_OF_MEMORY (2)", c.ID, refused)
		}
		peak := s.Driver.GroupPeak(s.dev, c.ID)
		if peak > uint64(limit)<<20 {
			t.Errorf("container %s held %d MiB on the card, over its %d MiB limit", c.ID, peak>>20, limit)
		}
		if got < limit-64-128 {
			t.Errorf("container %s got only %d MiB of its %d MiB", c.ID, got, limit)
		}
		t.Logf("container %s: %d MiB allocated, driver peak %d MiB, limit %d MiB", c.ID, got, peak>>20, limit)
	}
	if st := s.Driver.Stats().Devices[s.dev]; st.PeakUsedBytes > st.TotalBytes {
		t.Errorf("card peak %d > capacity %d", st.PeakUsedBytes, st.TotalBytes)
	}
}

func (s *nodeSide) processes(ctx context.Context, t *testing.T, ns string) {
	pods := runJob(ctx, t, ns, "procs", s.pinned("p", 2000, 0))
	c := s.start(ctx, t, pods["p"], "procs", "3", "500")
	for key, want := range map[string]string{"holders_ok": "3", "probe_before": "2", "probe_after": "0"} {
		if got := output(ctx, t, c, key); got != want {
			t.Errorf("container %s: %s=%s, want %s", c.ID, key, got, want)
		}
	}
	if peak := s.Driver.GroupPeak(s.dev, c.ID); peak > 2000<<20 {
		t.Errorf("container %s held %d MiB, over its 2000 MiB limit", c.ID, peak>>20)
	}
}

func (s *nodeSide) nvmlView(ctx context.Context, t *testing.T, ns string) {
	pods := runJob(ctx, t, ns, "view", s.pinned("v", 1500, 0), s.pinned("w", 1000, 0))
	neighbour := s.start(ctx, t, pods["w"], "fill", "100")
	output(ctx, t, neighbour, "refused")
	c := s.start(ctx, t, pods["v"], "nvml")
	if got := atoi(t, output(ctx, t, c, "total")); got != 1500<<20 {
		t.Errorf("NVML total %d, want the 1500 MiB limit", got)
	}
	self, n := output(ctx, t, c, "self"), output(ctx, t, c, "processes")
	if n != "1" || !strings.Contains(c.Stdout(), "process="+self+":") {
		t.Errorf("NVML process list in the container: %s processes, want only itself (%s):\n%s", n, self, c.Stdout())
	}
}

func (s *nodeSide) smShare(ctx context.Context, t *testing.T, ns string, limit int64) {
	name := fmt.Sprintf("sm%d", limit)
	pods := runJob(ctx, t, ns, name, s.pinned("limited", 1000, limit), s.pinned("busy", 1000, 100-limit))
	a := s.start(ctx, t, pods["limited"], "spin", "8")
	b := s.start(ctx, t, pods["busy"], "spin", "8")
	output(ctx, t, a, "spinning")
	output(ctx, t, b, "spinning")
	time.Sleep(3 * time.Second) // the limiter settles (a measurement window, not a wait for state)
	share := s.shareOver(a.ID, 3*time.Second)
	t.Logf("SM limit %d%%: the driver gave the container %.1f%% of the card beside a busy neighbour", limit, share)
	if share < float64(limit)-5 || share > float64(limit)+5 {
		t.Errorf("SM share %.1f%%, want %d +/- 5; limited container (host pids %v) stderr:\n%s\nbusy container stderr:\n%s",
			share, limit, s.GroupPids(a.ID), a.Stderr(), b.Stderr())
	}
}

// busyOf is the card time the fake driver gave the processes pids.
func (s *nodeSide) busyOf(pids []int) time.Duration {
	var sum time.Duration
	for _, pid := range pids {
		sum += s.Driver.ProcessBusy(s.dev, pid)
	}
	return sum
}

// groupBusy is the card time the fake driver gave container id's processes.
func (s *nodeSide) groupBusy(id string) time.Duration { return s.busyOf(s.GroupPids(id)) }

// shareOver is the percentage of the card container id got over d.
func (s *nodeSide) shareOver(id string, d time.Duration) float64 {
	b0, t0 := s.groupBusy(id), time.Now()
	time.Sleep(d)
	return 100 * float64(s.groupBusy(id)-b0) / float64(time.Since(t0))
}

// arrival: a container alone on its card runs unthrottled (the agent's
// utilisation switch); a neighbour allocated the card later gets its share
// from its start, because the agent throttles the first container again
// at the neighbour's Allocate, not at the switch's next pass.
func (s *nodeSide) arrival(ctx context.Context, t *testing.T, ns string) {
	const limit = 10
	alone := runJob(ctx, t, ns, "arrive-first", s.pinned("limited", 1000, limit))
	a := s.start(ctx, t, alone["limited"], "spin", "40")
	output(ctx, t, a, "spinning")
	var share float64
	for deadline := time.Now().Add(4 * switchInterval); time.Now().Before(deadline); {
		if share = s.shareOver(a.ID, time.Second); share > 50 {
			break
		}
	}
	t.Logf("alone on the card with an SM limit of %d%%: %.1f%% of the card", limit, share)
	if share <= 50 {
		t.Fatalf("a container alone on its card got %.1f%% of it with an SM limit of %d%%: the switch never freed it", share, limit)
	}
	second := runJob(ctx, t, ns, "arrive-second", s.pinned("busy", 1000, 100-limit))
	b := s.start(ctx, t, second["busy"], "spin", "8")
	output(ctx, t, b, "spinning")
	time.Sleep(time.Second) // libvgpu's rate adapts within a few 100 ms samples
	share = s.shareOver(a.ID, 3*time.Second)
	t.Logf("after the neighbour started: %.1f%% of the card", share)
	if share < limit-5 || share > limit+5 {
		t.Errorf("SM share %.1f%% once the neighbour ran, want %d +/- 5; first container stderr:\n%s", share, limit, a.Stderr())
	}
}

// switchInterval is the agent's utilisation switch interval
// (monitor.DefaultSwitchInterval; the monitor package links go-nvml, which
// this test binary cannot load without a driver).
const switchInterval = 5 * time.Second

// metric returns the value of the series with all of labels, or "" if none.
func metric(text, name string, labels map[string]string) string {
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, name+"{") {
			continue
		}
		ok := true
		for k, v := range labels {
			ok = ok && strings.Contains(line, k+"=\""+v+"\"")
		}
		if ok {
			return line[strings.LastIndex(line, " ")+1:]
		}
	}
	return ""
}

func (s *nodeSide) exporter(ctx context.Context, t *testing.T, ns string) {
	url, err := cluster.RestartAgentWithMetrics(ctx, s.Node)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cluster.StartAgent(ctx, s.Node, framework.AgentSpec{}); err != nil {
			t.Errorf("restart the agent: %v", err)
		}
	})
	pods := runJob(ctx, t, ns, "exp", s.pinned("mem", 1500, 40), s.pinned("sm", 1000, 60))
	mem := s.start(ctx, t, pods["mem"], "fill", "100")
	output(ctx, t, mem, "refused")
	sm := s.start(ctx, t, pods["sm"], "spin", "20")
	output(ctx, t, sm, "spinning")
	held := s.Driver.Stats().Devices[s.dev].Groups[mem.ID].Bytes
	labels := func(pod v1.Pod) map[string]string {
		return map[string]string{"podnamespace": ns, "podname": pod.Name, "ctrname": "cuda", "deviceuuid": s.card, "vdeviceid": "0"}
	}
	var text string
	err = cluster.Poll(ctx, time.Minute, "the exporter to report both containers", func(ctx context.Context) (bool, error) {
		resp, err := http.Get(url)
		if err != nil {
			return false, nil
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return false, nil
		}
		text = string(b)
		used, _ := strconv.ParseFloat(metric(text, "vGPU_device_memory_usage_in_bytes", labels(pods["mem"])), 64)
		util, _ := strconv.ParseFloat(metric(text, "vGPU_device_sm_utilization_percent", labels(pods["sm"])), 64)
		return uint64(used) == held && util >= 50 && util <= 70, nil
	})
	if err != nil {
		t.Errorf("%v: want vGPU_device_memory_usage_in_bytes %d for %s (what the driver says it holds) and "+
			"vGPU_device_sm_utilization_percent 60 +/- 10 for %s; metrics:\n%s", err, held, pods["mem"].Name,
			pods["sm"].Name, text)
	}
	if got, _ := strconv.ParseFloat(metric(text, "vGPU_device_memory_limit_in_bytes", labels(pods["mem"])), 64); got != 1500<<20 {
		t.Errorf("vGPU_device_memory_limit_in_bytes %v, want %d", got, 1500<<20)
	}
	// Each container has one card: no series for a second one.
	if got := metric(text, "vGPU_device_sm_limit_percent", map[string]string{"podname": pods["sm"].Name, "vdeviceid": "1"}); got != "" {
		t.Errorf("a series for a device the container does not have (vdeviceid 1): %s", got)
	}
	if got := metric(text, "vGPU_device_sm_limit_mode", labels(pods["sm"])); got != "1" {
		t.Errorf("vGPU_device_sm_limit_mode %q, want 1 (per-process utilisation by host pid)", got)
	}
}

// refused: a pod bound with a forged (unsigned) allocation is refused by the
// agent; started anyway, as a runtime would without the answer's devices,
// its container has no GPU and says so, and the driver never sees it.
func (s *nodeSide) refused(ctx context.Context, t *testing.T, ns string) {
	bindTime := strconv.FormatInt(time.Now().Unix(), 10)
	ids := s.card + ",NVIDIA,1000,10:"
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged", Annotations: map[string]string{
			vgpuproto.AnnotationIDs: ids, vgpuproto.AnnotationToAllocate: ids, vgpuproto.AnnotationNode: s.Node.Name,
			vgpuproto.AnnotationTime: bindTime, vgpuproto.AnnotationBindTime: bindTime, vgpuproto.AnnotationBindPhase: "allocating"}},
		Spec: v1.PodSpec{NodeName: s.Node.Name, SchedulerName: "volcano",
			Containers: []v1.Container{{Name: "cuda", Image: "busybox", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
				framework.VGPUNumber: resource.MustParse("1"), "volcano.sh/vgpu-memory": resource.MustParse("1000"),
			}}}}},
	}
	created, err := cluster.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
	checkRefused(ctx, t, s.Node, created, annSignature+" is missing")
	alloc, _ := s.Node.Kubelet.Allocation(created.UID)
	var ca framework.ContainerAllocation
	if len(alloc.Containers) == 1 {
		ca = alloc.Containers[0]
	}
	c, err := s.Runtime.Start(ctx, s.ContainerSpec("forged", ca, "fill", "64"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete() })
	code, err := c.Wait(ctx)
	if err != nil || code == 0 || !strings.Contains(c.Stdout(), "error=") {
		t.Errorf("a container without devices: exit %d (%v), stdout %q: want a visible failure", code, err, c.Stdout())
	}
	if pids := s.GroupPids("forged"); len(pids) != 0 {
		t.Errorf("the driver saw processes %v of the refused container", pids)
	}
}
