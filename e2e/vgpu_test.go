//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestVGPUJobRuns: a two-task gang asking for one vGPU of 2000 MiB and 30 %
// of the SMs each is scheduled by our deviceshare plugin, bound with the
// allocation annotations, admitted by the node agent through the fake
// kubelet's Allocate (environment for libvgpu), and Running.
func TestVGPUJobRuns(t *testing.T) {
	const ns = "vgpu-runs"
	ctx := setup(t, ns, 3*time.Minute)
	job := framework.VGPUJob(ns, "share", framework.VGPUTask{Name: "worker", Replicas: 2, VGPUs: 1, MemoryMiB: 2000, Cores: 30})
	if err := cluster.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, job.Name) })
	if err := cluster.WaitJobRunning(ctx, ns, job.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.JobPods(ctx, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		checkAllocated(ctx, t, pod, "2000", "30")
	}
	checkMetricsAgree(ctx, t)
}

// checkMetricsAgree waits until the scheduler's per-card metrics (its
// ledger) show, for every registered card, exactly the memory, cores and
// holders the pods' annotations give it.
func checkMetricsAgree(ctx context.Context, t *testing.T) {
	t.Helper()
	var diff []string
	err := cluster.Poll(ctx, 30*time.Second, "per-card metrics to match the pods' annotations", func(ctx context.Context) (bool, error) {
		cards, err := cluster.Usage(ctx)
		if err != nil {
			return false, err
		}
		families, err := cluster.SchedulerMetrics(ctx)
		if err != nil {
			return false, err
		}
		got := map[string]float64{}
		for _, name := range []string{"card_memory_allocated_mib", "card_cores_allocated", "card_pods"} {
			for _, m := range families["volcano_deviceshare_"+name].GetMetric() {
				l := framework.Labels(m)
				if l["device"] == "hamivgpu" {
					got[name+" "+l["node"]+"/"+l["card"]] = m.GetGauge().GetValue()
				}
			}
		}
		diff = diff[:0]
		seen := 0
		for _, c := range cards {
			mem, cores := 0, 0
			for _, h := range c.Holders {
				mem, cores = mem+h.MemoryMiB, cores+h.Cores
			}
			for name, want := range map[string]int{"card_memory_allocated_mib": mem, "card_cores_allocated": cores, "card_pods": len(c.Holders)} {
				key := name + " " + c.Node + "/" + c.UUID
				v, ok := got[key]
				if !ok || v != float64(want) {
					diff = append(diff, fmt.Sprintf("%s = %v (present %v), pods' annotations say %d", key, v, ok, want))
				}
				seen++
			}
		}
		if seen != len(got) {
			diff = append(diff, fmt.Sprintf("metrics cover %d card values, the nodes register %d", len(got), seen))
		}
		return len(diff) == 0 && seen > 0, nil
	})
	if err != nil {
		t.Fatalf("%v: %s", err, strings.Join(diff, "; "))
	}
}

// checkPreferred checks that the agent's GetPreferredAllocation answer was
// one the kubelet takes whole and that the device IDs the kubelet recorded
// for the container are of the cards the scheduler chose.
func checkPreferred(t *testing.T, pod string, c framework.ContainerAllocation, cards ...string) {
	t.Helper()
	if c.Preferred == nil || c.PreferredErr != "" {
		t.Errorf("pod %s container %s: GetPreferredAllocation answered %v (%s), want a valid answer", pod, c.Container, c.Preferred, c.PreferredErr)
	}
	got := make([]string, len(c.DeviceIDs))
	for i, id := range c.DeviceIDs {
		got[i] = deviceplugin.CardOf(id)
	}
	if !slices.Equal(got, cards) {
		t.Errorf("pod %s container %s: the kubelet allocated device IDs %v (cards %v), want devices of the scheduled cards %v",
			pod, c.Container, c.DeviceIDs, got, cards)
	}
}

// checkAllocated checks one single-container, single-card pod end to end:
// scheduler annotations, the agent's Allocate answer and bind-phase success.
func checkAllocated(ctx context.Context, t *testing.T, pod v1.Pod, memMiB, cores string) {
	t.Helper()
	ids := pod.Annotations[vgpuproto.AnnotationIDs]
	if !strings.HasSuffix(ids, fmt.Sprintf(",NVIDIA,%s,%s:", memMiB, cores)) || strings.Count(ids, ":") != 1 {
		t.Errorf("pod %s: %s=%q, want one card with %s MiB and %s cores", pod.Name, vgpuproto.AnnotationIDs, ids, memMiB, cores)
	}
	if _, ok := pod.Annotations[vgpuproto.AnnotationToAllocate]; !ok {
		t.Errorf("pod %s: no %s annotation", pod.Name, vgpuproto.AnnotationToAllocate)
	}
	if got := pod.Annotations[vgpuproto.AnnotationNode]; got != pod.Spec.NodeName {
		t.Errorf("pod %s: %s=%q, want the node it is bound to, %q", pod.Name, vgpuproto.AnnotationNode, got, pod.Spec.NodeName)
	}
	if pod.Annotations[vgpuproto.AnnotationBindTime] == "" {
		t.Errorf("pod %s: no %s annotation", pod.Name, vgpuproto.AnnotationBindTime)
	}
	node := cluster.Node(pod.Spec.NodeName)
	if node == nil {
		t.Fatalf("pod %s bound to %q, not a GPU node of the harness", pod.Name, pod.Spec.NodeName)
	}
	var alloc framework.PodAllocation
	err := cluster.Poll(ctx, 30*time.Second, "Allocate for pod "+pod.Name, func(context.Context) (bool, error) {
		var ok bool
		alloc, ok = node.Kubelet.Allocation(pod.UID)
		if !ok || len(alloc.Containers) != 1 {
			return false, nil
		}
		if e := alloc.Containers[0].Err; e != "" {
			return false, fmt.Errorf("attempt %d: %s", alloc.Containers[0].Attempts, e)
		}
		return alloc.Containers[0].Envs != nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	envs := alloc.Containers[0].Envs
	t.Logf("pod %s on %s: %s=%q; Allocate(%v) after %d attempt(s): CUDA_DEVICE_MEMORY_LIMIT_0=%s CUDA_DEVICE_SM_LIMIT=%s NVIDIA_VISIBLE_DEVICES=%s",
		pod.Name, pod.Spec.NodeName, vgpuproto.AnnotationIDs, ids, alloc.Containers[0].DeviceIDs, alloc.Containers[0].Attempts,
		envs["CUDA_DEVICE_MEMORY_LIMIT_0"], envs["CUDA_DEVICE_SM_LIMIT"], envs["NVIDIA_VISIBLE_DEVICES"])
	if errs := alloc.Containers[0].Errors; len(errs) > 0 {
		t.Logf("pod %s: Allocate attempts the fake kubelet retried: %q", pod.Name, errs)
	}
	for k, want := range map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": memMiB + "m", "CUDA_DEVICE_SM_LIMIT": cores} {
		if got := envs[k]; got != want {
			t.Errorf("pod %s: Allocate env %s=%q, want %q (all: %v)", pod.Name, k, got, want, envs)
		}
	}
	card := strings.SplitN(ids, ",", 2)[0]
	if got := envs["NVIDIA_VISIBLE_DEVICES"]; got != card {
		t.Errorf("pod %s: NVIDIA_VISIBLE_DEVICES=%q, want the scheduled card %q", pod.Name, got, card)
	}
	checkPreferred(t, pod.Name, alloc.Containers[0], card)
	err = cluster.Poll(ctx, 30*time.Second, "bind-phase success on "+pod.Name, func(ctx context.Context) (bool, error) {
		got, err := cluster.Kube.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return got.Annotations[vgpuproto.AnnotationBindPhase] == "success", fmt.Errorf("bind-phase %q", got.Annotations[vgpuproto.AnnotationBindPhase])
	})
	if err != nil {
		t.Error(err)
	}
}
