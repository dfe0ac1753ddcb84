//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestVGPUInitContainersAndSidecars: Jobs whose pods have a vGPU init
// container and a vGPU sidecar (framework.InitContainerCases), each pinned
// to its own card of one node, run; the fake kubelet admits the init
// containers, the sidecar and the app container in the kubelet's order,
// reusing the init container's devices as the kubelet does, and each
// Allocate answer carries that container's own card and limits; the
// scheduler's ledger charges each card what the rule says (the pod at its
// peak), and its metrics agree with the pods' annotations read by the rule.
func TestVGPUInitContainersAndSidecars(t *testing.T) {
	const ns = "vgpu-init"
	const node = "gpu-node-1"
	ctx := setup(t, ns, 4*time.Minute)
	n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cards, err := vgpuproto.DecodeRegister(n.Annotations[vgpuproto.AnnotationRegister])
	if err != nil || len(cards) < len(framework.InitContainerCases()) {
		t.Fatalf("node %s registers %d cards (%v)", node, len(cards), err)
	}
	type run struct {
		c    framework.InitContainerCase
		card string
	}
	var runs []run
	for i, c := range framework.InitContainerCases() {
		// The last cards: the other tests' pods bind first cards first.
		card := cards[len(cards)-1-i].UUID
		job := framework.VGPUContainersJob(ns, c.Name, framework.VGPUTask{Name: "w", Replicas: 1,
			NodeSelector: map[string]string{"kubernetes.io/hostname": node},
			Annotations:  map[string]string{vgpuproto.AnnotationUseUUID: card}}, c.Containers)
		if err := cluster.CreateJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, job.Name) })
		runs = append(runs, run{c, card})
	}
	for _, r := range runs {
		t.Run(r.c.Name, func(t *testing.T) {
			if err := cluster.WaitJobRunning(ctx, ns, r.c.Name, 2*time.Minute); err != nil {
				t.Fatal(err)
			}
			pod := onlyPod(ctx, t, ns, r.c.Name)
			t.Logf("pod %s: %s=%q", pod.Name, vgpuproto.AnnotationIDs, pod.Annotations[vgpuproto.AnnotationIDs])
			var alloc framework.PodAllocation
			var diffs []string
			err := cluster.Poll(ctx, 30*time.Second, "every container's Allocate answer for "+pod.Name, func(context.Context) (bool, error) {
				alloc, _ = cluster.Node(node).Kubelet.Allocation(pod.UID)
				diffs = framework.CheckContainerAnswers(&pod, alloc)
				return len(diffs) == 0, nil
			})
			for _, ca := range alloc.Containers {
				t.Logf("  %s (init %v, sidecar %v): devices %v (reused %v, preferred %v) NVIDIA_VISIBLE_DEVICES=%s CUDA_DEVICE_MEMORY_LIMIT_0=%s CUDA_DEVICE_SM_LIMIT=%s",
					ca.Container, ca.Init, ca.Sidecar, ca.DeviceIDs, ca.Reused, ca.Preferred,
					ca.Envs["NVIDIA_VISIBLE_DEVICES"], ca.Envs["CUDA_DEVICE_MEMORY_LIMIT_0"], ca.Envs["CUDA_DEVICE_SM_LIMIT"])
				if ca.PreferredErr != "" {
					t.Errorf("container %s: GetPreferredAllocation answered %v, which the kubelet would not take whole: %s",
						ca.Container, ca.Preferred, ca.PreferredErr)
				}
			}
			if err != nil {
				t.Fatalf("%v: %s", err, strings.Join(diffs, "; "))
			}
			checkCardCharge(ctx, t, node, r.card, r.c)
		})
	}
	checkMetricsAgree(ctx, t)
}

// checkCardCharge waits until the scheduler's per-card metrics (its ledger)
// show the card holding what the case says.
func checkCardCharge(ctx context.Context, t *testing.T, node, card string, c framework.InitContainerCase) {
	t.Helper()
	want := map[string]float64{"card_memory_allocated_mib": float64(c.WantMemMiB), "card_cores_allocated": float64(c.WantCores),
		"card_pods": float64(c.WantHolders)}
	got := map[string]float64{}
	err := cluster.Poll(ctx, 30*time.Second, "the scheduler's charge of card "+card, func(ctx context.Context) (bool, error) {
		families, err := cluster.SchedulerMetrics(ctx)
		if err != nil {
			return false, err
		}
		for name := range want {
			for _, m := range families["volcano_deviceshare_"+name].GetMetric() {
				if l := framework.Labels(m); l["device"] == "hamivgpu" && l["node"] == node && l["card"] == card {
					got[name] = m.GetGauge().GetValue()
				}
			}
		}
		return fmt.Sprint(got) == fmt.Sprint(want), nil
	})
	if err != nil {
		t.Fatalf("%v: card %s: %v, want %v", err, card, got, want)
	}
}
