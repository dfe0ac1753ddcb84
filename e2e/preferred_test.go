//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestVGPUPreferredAllocation: a container asking for two vGPUs, steered by
// volcano.sh/vgpu-use-gpuuuid to the node's last two cards, gets from the
// kubelet device IDs of exactly those cards, in the allocation's order: the
// fake kubelet asks the agent's GetPreferredAllocation before Allocate and
// takes the answer as the real kubelet does. Without the preference the
// kubelet would take the first free IDs, both of the node's first card.
func TestVGPUPreferredAllocation(t *testing.T) {
	const ns = "vgpu-preferred"
	ctx := setup(t, ns, 3*time.Minute)
	node := gpuNodes[0]
	cards, err := cluster.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, c := range cards {
		if c.Node == node {
			uuids = append(uuids, c.UUID)
		}
	}
	if len(uuids) < 3 {
		t.Fatalf("node %s registers %d cards, want at least 3", node, len(uuids))
	}
	want := uuids[len(uuids)-2:]
	job := framework.VGPUJob(ns, "pair", framework.VGPUTask{Name: "worker", Replicas: 1, VGPUs: 2, MemoryMiB: 1000,
		Annotations:  map[string]string{vgpuproto.AnnotationUseUUID: strings.Join(want, ",")},
		NodeSelector: map[string]string{"kubernetes.io/hostname": node}})
	if err := cluster.CreateJob(ctx, job); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, job.Name) })
	if err := cluster.WaitJobRunning(ctx, ns, job.Name, time.Minute); err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.JobPods(ctx, ns, job.Name)
	if err != nil || len(pods) != 1 {
		t.Fatalf("job pods: %d, %v; want 1", len(pods), err)
	}
	pod := pods[0]
	entries, err := vgpuproto.DecodeAllocation(pod.Annotations[vgpuproto.AnnotationIDs])
	if err != nil || len(entries) != 1 || len(entries[0]) != 2 {
		t.Fatalf("pod %s: %s=%q (%v), want one container with two cards", pod.Name, vgpuproto.AnnotationIDs, pod.Annotations[vgpuproto.AnnotationIDs], err)
	}
	scheduled := []string{entries[0][0].UUID, entries[0][1].UUID}
	for _, u := range scheduled {
		if !strings.Contains(strings.Join(want, ","), u) {
			t.Fatalf("pod %s scheduled on %v, want the cards it asked for, %v", pod.Name, scheduled, want)
		}
	}
	alloc := waitAllocation(ctx, t, cluster.Node(pod.Spec.NodeName), pod)
	t.Logf("pod %s: cards %v; GetPreferredAllocation %v; kubelet's device IDs %v", pod.Name, scheduled,
		alloc.Containers[0].Preferred, alloc.Containers[0].DeviceIDs)
	checkPreferred(t, pod.Name, alloc.Containers[0], scheduled...)
}

// waitAllocation waits until the fake kubelet has an Allocate answer for
// every container of the pod that asks for vGPUs.
func waitAllocation(ctx context.Context, t *testing.T, node *framework.GPUNode, pod v1.Pod) framework.PodAllocation {
	t.Helper()
	if node == nil {
		t.Fatalf("pod %s bound to %q, not a GPU node of the harness", pod.Name, pod.Spec.NodeName)
	}
	var alloc framework.PodAllocation
	err := cluster.Poll(ctx, 30*time.Second, "Allocate for pod "+pod.Name, func(context.Context) (bool, error) {
		var ok bool
		alloc, ok = node.Kubelet.Allocation(pod.UID)
		if !ok || len(alloc.Containers) == 0 {
			return false, nil
		}
		for _, c := range alloc.Containers {
			if c.Err != "" {
				return false, fmt.Errorf("container %s, attempt %d: %s", c.Container, c.Attempts, c.Err)
			}
			if c.Envs == nil {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return alloc
}
