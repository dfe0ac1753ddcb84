//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
)

// TestHAMiAgentServesOurAllocations: a node registered and served by HAMi's
// NVIDIA device plugin (hamiAgent, a stand-in written from HAMi's source
// that reads only hami.io/*), with the fake kubelet calling its Allocate,
// and no agent of ours. Two flavours of the plugin: HAMi v2.4's, which
// finds the pending pod by scanning the node's pods, and HAMi's since PR
// #451, which first takes the pod hami.io/mutex.lock names.
//
// A lock left on the node by a deleted pod is taken over. A pod HAMi's own
// scheduler placed (only hami.io/vgpu-devices-allocated, holding card 0
// whole) is counted: our Jobs' pods all land on card 1,
// where binpack would otherwise have chosen card 0. A one-pod Job, then a
// two-pod gang on the same node: each pod is Running, the plugin served it
// from hami.io/vgpu-devices-to-allocate (the limits and card in its
// Allocate answer), set hami.io/bind-phase success and released the lock,
// so the next pod could bind; with the lock-first plugin every pod was
// found through the lock our scheduler took. No volcano.sh/devices-to-
// allocate or volcano.sh/bind-phase is left on the pods for nobody.
func TestHAMiAgentServesOurAllocations(t *testing.T) {
	const ns = "hami-agent"
	ctx := setup(t, ns, 6*time.Minute)
	for _, flavour := range []struct {
		name      string
		lockFirst bool
	}{{"hami-scan", false}, {"hami-lock", true}} {
		t.Run(flavour.name, func(t *testing.T) {
			node := flavour.name
			cards := []hamiCard{{uuid: "GPU-" + node + "-0", memMiB: 24576}, {uuid: "GPU-" + node + "-1", memMiB: 24576}}
			kubelet, agent := addHAMiNode(ctx, t, node, cards, flavour.lockFirst)
			placeLikeHAMi(ctx, t, ns, node, cards[0])
			// A lock whose pod was deleted before HAMi's plugin served it:
			// taken over at once, as HAMi's scheduler does.
			dangling := time.Now().UTC().Format(time.RFC3339) + "," + ns + ",deleted-before-allocate"
			if err := agent.patchNode(ctx, map[string]any{hamiNodeLock: dangling}); err != nil {
				t.Fatal(err)
			}

			sel := map[string]string{"hami-agent": node}
			one := framework.VGPUJob(ns, node+"-one", framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: 1, MemoryMiB: 7000, Cores: 30, NodeSelector: sel})
			mustRun(ctx, t, one)
			checkServedByHAMi(ctx, t, kubelet, ns, one.Name, node, cards[1].uuid)
			gang := framework.VGPUJob(ns, node+"-gang", framework.VGPUTask{Name: "w", Replicas: 2, VGPUs: 1, MemoryMiB: 7000, Cores: 30, NodeSelector: sel})
			mustRun(ctx, t, gang)
			checkServedByHAMi(ctx, t, kubelet, ns, gang.Name, node, cards[1].uuid)

			served, errs := agent.report()
			t.Logf("node %s: the HAMi plugin served %+v; answered errors %q", node, served, errs)
			if len(errs) > 0 {
				t.Errorf("node %s: the HAMi plugin answered errors %q", node, errs)
			}
			if len(served) != 3 {
				t.Errorf("node %s: the HAMi plugin served %d containers, want 3", node, len(served))
			}
			for _, s := range served {
				if flavour.lockFirst && s.foundBy != "lock" {
					t.Errorf("node %s: pod %s found by %s, want through hami.io/mutex.lock", node, s.pod, s.foundBy)
				}
			}
			n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if v, ok := n.Annotations[hamiNodeLock]; ok {
				t.Errorf("node %s still locked (%s=%q) after every pod was served", node, hamiNodeLock, v)
			}
		})
	}
}

// addHAMiNode creates a kwok node with a fake kubelet and the HAMi plugin
// stand-in advertising the scheduler's vGPU count resource (HAMi's plugin
// takes its resource name from its configuration; docs/configuration.md),
// and waits until the kubelet advertises the cards' replicas.
func addHAMiNode(ctx context.Context, t *testing.T, node string, cards []hamiCard, lockFirst bool) (*framework.FakeKubelet, *hamiAgent) {
	t.Helper()
	if err := cluster.AddNode(ctx, node, nil, nil, map[string]string{"hami-agent": node}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteNode(context.Background(), node) })
	dir := filepath.Join(cluster.WorkDir, "nodes", node, "dp")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	kubelet, err := framework.StartFakeKubelet(ctx, node, dir, cluster.Kube)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(kubelet.Stop)
	agent, err := startHAMiAgent(ctx, cluster.Kube, node, dir, framework.VGPUNumber, cards, lockFirst)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(agent.stop)
	want := int64(len(cards) * agent.split)
	err = cluster.Poll(ctx, time.Minute, "node "+node+" advertises its vGPUs", func(ctx context.Context) (bool, error) {
		n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		q := n.Status.Allocatable[v1.ResourceName(framework.VGPUNumber)]
		return q.Value() == want, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return kubelet, agent
}

// placeLikeHAMi creates a pod the way HAMi's scheduler leaves one it placed
// and its plugin served: bound to node, holding card whole, recorded only in
// hami.io/vgpu-devices-allocated (pkg/device/nvidia/device.go
// PatchAnnotations), with HAMi's resource names, which this cluster does not
// advertise, left out.
func placeLikeHAMi(ctx context.Context, t *testing.T, ns, node string, card hamiCard) {
	t.Helper()
	pod := &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: node + "-placed-by-hami", Annotations: map[string]string{
			"hami.io/vgpu-devices-allocated": fmt.Sprintf("%s,NVIDIA,%d,100:;", card.uuid, card.memMiB),
			hamiToAllocate:                   ";",
			hamiAssignedNode:                 node,
			hamiBindPhase:                    "success",
		}},
		Spec: v1.PodSpec{NodeName: node, SchedulerName: "hami-scheduler", RestartPolicy: v1.RestartPolicyNever,
			Containers: []v1.Container{{Name: "cuda", Image: "nvidia/cuda:12.4.1-base-ubuntu22.04"}}},
	}
	if _, err := cluster.Kube.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cluster.Kube.CoreV1().Pods(ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{})
	})
}

// checkServedByHAMi checks every pod of the job end to end against the HAMi
// plugin: the scheduler's hami.io allocation names card with the request,
// the plugin's Allocate answer carries it, the plugin consumed it and set
// bind-phase success, and no volcano.sh key is left waiting for an agent
// that does not exist on the node.
func checkServedByHAMi(ctx context.Context, t *testing.T, kubelet *framework.FakeKubelet, ns, job, node, card string) {
	t.Helper()
	pods, err := cluster.JobPods(ctx, ns, job)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != node {
			t.Errorf("pod %s on %q, want %s", p.Name, p.Spec.NodeName, node)
			continue
		}
		if got, want := p.Annotations["hami.io/vgpu-devices-allocated"], card+",NVIDIA,7000,30:;"; got != want {
			t.Errorf("pod %s: hami.io/vgpu-devices-allocated=%q, want %q (card 0 is held by the pod HAMi placed)", p.Name, got, want)
		}
		var alloc framework.PodAllocation
		err := cluster.Poll(ctx, 30*time.Second, "HAMi's Allocate for pod "+p.Name, func(context.Context) (bool, error) {
			var ok bool
			alloc, ok = kubelet.Allocation(p.UID)
			if !ok || len(alloc.Containers) != 1 {
				return false, nil
			}
			if e := alloc.Containers[0].Err; e != "" && alloc.Containers[0].Attempts >= 8 {
				return false, fmt.Errorf("attempt %d: %s", alloc.Containers[0].Attempts, e)
			}
			return alloc.Containers[0].Envs != nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if errs := alloc.Containers[0].Errors; len(errs) > 0 {
			t.Logf("pod %s: Allocate attempts the fake kubelet retried: %q", p.Name, errs)
		}
		envs := alloc.Containers[0].Envs
		for k, want := range map[string]string{"CUDA_DEVICE_MEMORY_LIMIT_0": "7000m", "CUDA_DEVICE_SM_LIMIT": "30", "NVIDIA_VISIBLE_DEVICES": card} {
			if envs[k] != want {
				t.Errorf("pod %s: HAMi's Allocate answered %s=%q, want %q (all: %v)", p.Name, k, envs[k], want, envs)
			}
		}
		var cur *v1.Pod
		err = cluster.Poll(ctx, 30*time.Second, "hami.io/bind-phase success on "+p.Name, func(ctx context.Context) (bool, error) {
			cur, err = cluster.Kube.CoreV1().Pods(ns).Get(ctx, p.Name, metav1.GetOptions{})
			return err == nil && cur.Annotations[hamiBindPhase] == "success", err
		})
		if err != nil {
			t.Fatal(err)
		}
		if v := cur.Annotations[hamiToAllocate]; strings.Contains(v, "NVIDIA") {
			t.Errorf("pod %s: %s=%q still lists cards after Allocate", p.Name, hamiToAllocate, v)
		}
		for _, k := range []string{"volcano.sh/devices-to-allocate", "volcano.sh/bind-phase"} {
			if v, ok := cur.Annotations[k]; ok {
				t.Errorf("pod %s: %s=%q on a HAMi node, where no agent reads it", p.Name, k, v)
			}
		}
		if cur.Status.Phase != v1.PodRunning {
			t.Errorf("pod %s is %s, want Running", p.Name, cur.Status.Phase)
		}
	}
}
