//go:build e2e

package e2e

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// topoNode is a node added for the topology tests: its cards' NUMA nodes
// and indices as its agent registered them.
type topoNode struct {
	name  string
	uuids []string
	numa  map[string]int32
	index map[string]int
}

// addTopoNode adds a node of the mock machine, removed when the test ends,
// and reads back what its agent published: the registration with NUMA
// nodes and, when wantScores, the link scores.
func addTopoNode(ctx context.Context, t *testing.T, name, machine string, wantScores bool) *topoNode {
	t.Helper()
	if _, err := cluster.AddGPUNodeWith(ctx, name, machine, framework.AgentSpec{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := cluster.RemoveGPUNode(ctx, name); err != nil {
			t.Errorf("remove node %s: %v", name, err)
		}
	})
	node, err := cluster.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	reg := node.Annotations[vgpuproto.AnnotationRegister]
	cards, err := vgpuproto.DecodeRegister(reg)
	if err != nil {
		t.Fatalf("node %s registration: %v", name, err)
	}
	n := &topoNode{name: name, numa: map[string]int32{}, index: map[string]int{}}
	for i, c := range cards {
		if strings.Count(strings.Split(reg, ":")[i], ",") != 6 {
			t.Errorf("node %s card %d registered as %q, want the 7-field form with numa", name, i, strings.Split(reg, ":")[i])
		}
		n.uuids = append(n.uuids, c.UUID)
		n.numa[c.UUID], n.index[c.UUID] = c.NUMA, i
	}
	score, ok := node.Annotations[vgpuproto.AnnotationHAMiScore]
	if ok != wantScores {
		t.Fatalf("node %s: %s published %v, want %v", name, vgpuproto.AnnotationHAMiScore, ok, wantScores)
	}
	if ok {
		if _, err := vgpuproto.DecodeScores(score, n.uuids); err != nil {
			t.Fatalf("node %s: %v", name, err)
		}
	}
	t.Logf("node %s (%s): NUMA %v", name, machine, n.numa)
	return n
}

// topoTask is a one-pod task on node asking for k cards of memMiB each,
// with the extra pod annotations.
func topoTask(node string, k, memMiB int64, ann map[string]string) framework.VGPUTask {
	return framework.VGPUTask{Name: "w", Replicas: 1, VGPUs: k, MemoryMiB: memMiB, Annotations: ann,
		NodeSelector: map[string]string{"kubernetes.io/hostname": node}}
}

// cardsOf returns the card indices (on n) the job's only pod was given,
// sorted.
func (n *topoNode) cardsOf(ctx context.Context, t *testing.T, ns, job string) []int {
	t.Helper()
	pod := onlyPod(ctx, t, ns, job)
	if pod.Spec.NodeName != n.name {
		t.Fatalf("pod %s on %q, want %s", pod.Name, pod.Spec.NodeName, n.name)
	}
	ctrs, err := vgpuproto.DecodeAllocation(pod.Annotations[vgpuproto.AnnotationIDs])
	if err != nil || len(ctrs) != 1 {
		t.Fatalf("pod %s allocation %q: %v", pod.Name, pod.Annotations[vgpuproto.AnnotationIDs], err)
	}
	var out []int
	for _, d := range ctrs[0] {
		i, ok := n.index[d.UUID]
		if !ok {
			t.Fatalf("pod %s got card %s, not one of node %s's", pod.Name, d.UUID, n.name)
		}
		out = append(out, i)
	}
	sort.Ints(out)
	return out
}

// runTopo runs the job to Running, returns its cards and deletes it.
func (n *topoNode) runTopo(ctx context.Context, t *testing.T, ns, job string, task framework.VGPUTask) []int {
	t.Helper()
	j := framework.VGPUJob(ns, job, task)
	mustRun(ctx, t, j)
	cards := n.cardsOf(ctx, t, ns, job)
	t.Logf("job %s on %s: cards %v", job, n.name, cards)
	if err := cluster.DeleteJob(ctx, ns, job); err != nil {
		t.Fatal(err)
	}
	return cards
}

func (n *topoNode) sameNUMA(cards []int) bool {
	for _, c := range cards {
		if n.numa[n.uuids[c]] != n.numa[n.uuids[cards[0]]] {
			return false
		}
	}
	return true
}

// The mock machines (vgpu-device-plugin/nvidia/nvmlmock; not imported:
// go-nvml's cgo symbols do not resolve in the test binary).
const (
	machinePCIeH100 = "pcie-h100x8"
	machinePCIeA30  = "pcie-a30x4"
)

var (
	numaBind     = map[string]string{vgpuproto.AnnotationNUMABind: "true"}
	topoAware    = map[string]string{vgpuproto.AnnotationGPUPolicy: vgpu.PolicyTopologyAware}
	pcieH100Mem  = int64(60000) // one pod per 80 GiB card
	pcieA30Mem   = int64(20000) // one pod per 24 GiB card
	bridgedPairs = [][]int{{0, 1}, {2, 3}, {4, 5}, {6, 7}}
)

// pinned is a one-pod job holding memMiB on each of node n's cards at the
// indices (volcano.sh/vgpu-use-gpuuuid), running until the test ends.
func (n *topoNode) pinned(ctx context.Context, t *testing.T, ns, job string, memMiB int64, cards ...int) *batchv1alpha1.Job {
	t.Helper()
	var uuids []string
	for _, c := range cards {
		uuids = append(uuids, n.uuids[c])
	}
	j := framework.VGPUJob(ns, job, topoTask(n.name, int64(len(cards)), memMiB,
		map[string]string{vgpuproto.AnnotationUseUUID: strings.Join(uuids, ",")}))
	mustRun(ctx, t, j)
	return j
}

// TestTopologyNUMABindOnOurAgent: on a node of our agent with two NUMA
// nodes (8 x H100 PCIe, GPUs 0-3 on NUMA 0, 4-7 on NUMA 1), a 4-card
// nvidia.com/numa-bind pod gets four cards of one NUMA node although
// binpack alone would take the partly used cards 3 and 4 first; while a
// pod holds one more card of each NUMA node (three cards free on each) it
// waits with a reason naming NUMA, and runs on one NUMA node once the
// cards are back.
func TestTopologyNUMABindOnOurAgent(t *testing.T) {
	const ns = "topo-numa"
	ctx := setup(t, ns, 8*time.Minute)
	n := addTopoNode(ctx, t, "topo-pcie-numa", machinePCIeH100, true)
	if got := []int32{n.numa[n.uuids[0]], n.numa[n.uuids[3]], n.numa[n.uuids[4]], n.numa[n.uuids[7]]}; !slices.Equal(got, []int32{0, 0, 1, 1}) {
		t.Fatalf("registered NUMA of GPUs 0,3,4,7 = %v, want 0,0,1,1", got)
	}
	n.pinned(ctx, t, ns, "partial", 10000, 3, 4)

	cards := n.runTopo(ctx, t, ns, "bind4", topoTask(n.name, 4, pcieH100Mem, numaBind))
	if len(cards) != 4 || !n.sameNUMA(cards) {
		t.Errorf("numa-bind pod got cards %v, want four of one NUMA node", cards)
	}

	blocker := n.pinned(ctx, t, ns, "blocker", pcieH100Mem, 0, 5)
	waiting := framework.VGPUJob(ns, "bind4-waits", topoTask(n.name, 4, pcieH100Mem, numaBind))
	waitPendingWithReason(ctx, t, waiting, "NUMA")
	if err := cluster.DeleteJob(ctx, ns, blocker.Name); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitJobRunning(ctx, ns, waiting.Name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if cards := n.cardsOf(ctx, t, ns, waiting.Name); len(cards) != 4 || !n.sameNUMA(cards) {
		t.Errorf("numa-bind pod got cards %v once the blocker left, want four of one NUMA node", cards)
	}
}

// TestTopologyAwareOnOurAgent: with hami.io/gpu-scheduler-policy:
// topology-aware, on the H100 PCIe node (NVLink bridges 0-1, 2-3, 4-5, 6-7;
// one PCIe switch per socket) with cards 3 and 4 partly used (binpack alone
// would take them first: 3,4 and then 0,1), a 2-card pod gets a bridged
// pair and a 4-card pod two bridged pairs on one socket, from the scores
// our agent published;
// on a node without NVLink (4 x A30) the same pods run, the 2-card one on
// a pair sharing a PCIe switch.
func TestTopologyAwareOnOurAgent(t *testing.T) {
	const ns = "topo-aware"
	ctx := setup(t, ns, 10*time.Minute)
	n := addTopoNode(ctx, t, "topo-pcie-aware", machinePCIeH100, true)
	n.pinned(ctx, t, ns, "partial", 10000, 3, 4)

	pair := n.runTopo(ctx, t, ns, "aware2", topoTask(n.name, 2, pcieH100Mem, topoAware))
	if !slices.ContainsFunc(bridgedPairs, func(p []int) bool { return slices.Equal(p, pair) }) {
		t.Errorf("topology-aware 2-card pod got cards %v, want an NVLink-bridged pair %v", pair, bridgedPairs)
	}
	four := n.runTopo(ctx, t, ns, "aware4", topoTask(n.name, 4, pcieH100Mem, topoAware))
	if !slices.Equal(four, []int{0, 1, 2, 3}) && !slices.Equal(four, []int{4, 5, 6, 7}) {
		t.Errorf("topology-aware 4-card pod got cards %v, want both bridged pairs of one socket", four)
	}

	a30 := addTopoNode(ctx, t, "topo-a30", machinePCIeA30, true)
	pair = a30.runTopo(ctx, t, ns, "a30-aware2", topoTask(a30.name, 2, pcieA30Mem, topoAware))
	if !slices.Equal(pair, []int{0, 1}) && !slices.Equal(pair, []int{2, 3}) {
		t.Errorf("topology-aware 2-card pod without NVLink got cards %v, want a pair on one PCIe switch", pair)
	}
	if four := a30.runTopo(ctx, t, ns, "a30-aware4", topoTask(a30.name, 4, pcieA30Mem, topoAware)); len(four) != 4 {
		t.Errorf("topology-aware 4-card pod without NVLink got cards %v, want all four", four)
	}
	if two := a30.runTopo(ctx, t, ns, "a30-bind2", topoTask(a30.name, 2, pcieA30Mem, numaBind)); !a30.sameNUMA(two) {
		t.Errorf("numa-bind 2-card pod without NVLink got cards %v, want one NUMA node", two)
	}
	checkNoOvercommit(ctx, t)
}
