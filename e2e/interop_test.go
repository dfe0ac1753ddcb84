//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestInteropStockSchedulerWithOurAgent: Volcano v1.10.0's own scheduler,
// built from the volcano.sh/volcano module with its built-in deviceshare and
// the same configuration (deviceshare.VGPUEnable), accepts our node agent's
// registration and handshake, and our agent admits what it allocates: the
// Job runs, the agent's Allocate returns the limits and moves bind-phase to
// success. Clusters can therefore roll our agent out before our scheduler
// (with no allocation key: the stock scheduler signs nothing).
func TestInteropStockSchedulerWithOurAgent(t *testing.T) {
	const ns = "interop-stock"
	ctx := setup(t, ns, 5*time.Minute)
	useScheduler(ctx, t, framework.SchedulerSpec{Binary: framework.BinStockScheduler})
	useAgents(ctx, t, framework.AgentSpec{Unsigned: true}) // Volcano's scheduler does not sign
	checkRegisteredWithNUMA(ctx, t)
	job := framework.VGPUJob(ns, "stock", framework.VGPUTask{Name: "w", Replicas: 2, VGPUs: 1, MemoryMiB: 3000, Cores: 40})
	mustRun(ctx, t, job)
	pods, err := cluster.JobPods(ctx, ns, job.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, pod := range pods {
		checkAllocated(ctx, t, pod, "3000", "40")
	}
	checkNoOvercommit(ctx, t)
	if n, err := cluster.SchedulerLogCount("deviceshare"); err != nil || n == 0 {
		t.Errorf("the stock scheduler's log never mentions deviceshare (%d, %v): was the built-in plugin enabled?", n, err)
	}
}

// checkRegisteredWithNUMA wants every agent node's registration in the
// 7-field form "UUID,count,devmem,type,health,mode,numa:", so that the stock
// scheduler test proves upstream reads it (Volcano v1.10 reads fields 0-4).
func checkRegisteredWithNUMA(ctx context.Context, t *testing.T) {
	t.Helper()
	for _, n := range cluster.Nodes() {
		if !n.VGPU() {
			continue
		}
		node, err := cluster.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		reg := node.Annotations[vgpuproto.AnnotationRegister]
		for _, entry := range strings.Split(strings.TrimSuffix(reg, ":"), ":") {
			if strings.Count(entry, ",") != 6 {
				t.Errorf("node %s registers card %q, want UUID,count,devmem,type,health,mode,numa", n.Name, entry)
			}
		}
	}
}

// TestInteropUpstreamRegisteredNodes: nodes registered the way other agents
// do it, with no agent of ours running, are scheduled by our scheduler:
// one with Volcano's vGPU device plugin's volcano.sh/node-vgpu-register
// ("UUID,count,memMiB,type,health:" per card, handshake "Reported_<time>")
// and one with HAMi's JSON hami.io/node-nvidia-register. Each Job is pinned
// to its node; its pods must be bound there with the allocation annotations
// naming one of that node's cards. The test plays those nodes' agents: it
// moves bind-phase to success once a pod is bound, and checks that the
// scheduler never has two pods pending with one node's agent (an agent
// cannot tell them apart in the kubelet's Allocate).
func TestInteropUpstreamRegisteredNodes(t *testing.T) {
	const ns = "interop-upstream"
	ctx := setup(t, ns, 5*time.Minute)
	now := time.Now().Format("2006.01.02 15:04:05")
	nodes := []struct {
		name, uuidPrefix string
		annotations      map[string]string
	}{{
		name: "volcano-agent-node", uuidPrefix: "GPU-volcano-",
		annotations: map[string]string{
			"volcano.sh/node-vgpu-register": "GPU-volcano-0,10,24576,NVIDIA-NVIDIA A10,true:" +
				"GPU-volcano-1,10,24576,NVIDIA-NVIDIA A10,true:",
			"volcano.sh/node-vgpu-handshake": "Reported_" + now,
		},
	}, {
		name: "hami-agent-node", uuidPrefix: "GPU-hami-",
		annotations: map[string]string{
			"hami.io/node-nvidia-register": `[{"id":"GPU-hami-0","index":0,"count":10,"devmem":24576,"devcore":100,"type":"NVIDIA-NVIDIA A10","numa":0,"mode":"hami-core","health":true},` +
				`{"id":"GPU-hami-1","index":1,"count":10,"devmem":24576,"devcore":100,"type":"NVIDIA-NVIDIA A10","numa":0,"mode":"hami-core","health":true}]`,
			"hami.io/node-handshake": "Reported " + now,
		},
	}}
	for _, n := range nodes {
		err := cluster.AddNode(ctx, n.name, v1.ResourceList{framework.VGPUNumber: resource.MustParse("20")}, n.annotations, map[string]string{"interop": n.name})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.DeleteNode(context.Background(), n.name) })
		agentCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); playAgent(agentCtx, t, ns, n.name) }()
		t.Cleanup(func() { stop(); <-done })
	}
	for _, n := range nodes {
		job := framework.VGPUJob(ns, n.name, framework.VGPUTask{
			Name: "w", Replicas: 3, VGPUs: 1, MemoryMiB: 10000, Cores: 30,
			NodeSelector: map[string]string{"interop": n.name},
		})
		mustRun(ctx, t, job)
		pods, err := cluster.JobPods(ctx, ns, job.Name)
		if err != nil {
			t.Fatal(err)
		}
		perCard := map[string]int{}
		for _, p := range pods {
			ids := p.Annotations[vgpuproto.AnnotationIDs]
			if p.Spec.NodeName != n.name || !strings.HasPrefix(ids, n.uuidPrefix) || !strings.HasSuffix(ids, ",10000,30:") {
				t.Errorf("pod %s on %q with %s=%q, want node %s and one of its cards with 10000 MiB, 30 cores",
					p.Name, p.Spec.NodeName, vgpuproto.AnnotationIDs, ids, n.name)
			}
			perCard[strings.SplitN(ids, ",", 2)[0]]++
		}
		// 24576 MiB cards: two 10000 MiB pods fit on one, never three.
		for card, k := range perCard {
			if k > 2 {
				t.Errorf("node %s: %d pods of 10000 MiB on card %s of 24576 MiB", n.name, k, card)
			}
		}
		t.Logf("node %s: pods per card %v", n.name, perCard)
	}
}

// playAgent does what a node agent does with the vGPU protocol's bind-phase:
// each pod bound to node with bind-phase allocating is moved to success, as
// the agent's Allocate would (volcano.sh/bind-phase, or hami.io/bind-phase
// on the HAMi-registered node, whose lock HAMi's plugin then removes; the
// plugin itself is played in hami_test.go). Two such pods at once on the
// node is an error.
func playAgent(ctx context.Context, t *testing.T, ns, node string) {
	for ctx.Err() == nil {
		pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
		if err == nil {
			var pending []string
			keys := map[string]string{}
			for _, p := range pods.Items {
				for _, k := range []string{vgpuproto.AnnotationBindPhase, vgpuproto.AnnotationHAMiBindPhase} {
					if p.Annotations[k] == "allocating" {
						pending = append(pending, p.Name)
						keys[p.Name] = k
					}
				}
			}
			if len(pending) > 1 {
				t.Errorf("node %s: %d pods wait for the node agent at once %v: it could serve the wrong one", node, len(pending), pending)
			}
			for _, name := range pending {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"success"}}}`, keys[name])
				_, _ = cluster.Kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				if keys[name] != vgpuproto.AnnotationHAMiBindPhase {
					continue
				}
				if n, err := cluster.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{}); err == nil &&
					strings.HasSuffix(n.Annotations[vgpuproto.HAMiNodeLock], ","+ns+","+name) {
					patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, vgpuproto.HAMiNodeLock)
					_, _ = cluster.Kube.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
	}
}
