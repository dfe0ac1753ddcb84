package deviceshare

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/cmd/scheduler/app/options"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// BenchmarkAllocateBackends is BenchmarkAllocateVGPU for every device type
// (issue 36, item 3): one allocate session of the type's pods (10,000, or
// BENCH_PODS; gangs of four) on 1,000 nodes (BENCH_NODES) of 8 cards, with
// impl=floor, the cheapest device check for that type's resource (a
// floorPlugin reading one integer per card), impl=ours and impl=noop, on
// identical clusters and plugin sets (gang and deviceshare, then
// predicates). ours / floor per device type is ours' cost beyond what any
// device plugin pays under Volcano, as for vGPU. BENCH_BACKENDS
// (vgpu,gpushare,ascend,mindcluster) and BENCH_IMPLS (noop,floor,ours)
// choose the sub-benchmarks.
func BenchmarkAllocateBackends(b *testing.B) {
	saved := options.ServerOpts
	options.ServerOpts = &options.ServerOption{MinNodesToFind: 100, MinPercentageOfNodesToFind: 5, PercentageOfNodesToFind: 0}
	defer func() { options.ServerOpts = saved }()
	nodes := []int{1000}
	if os.Getenv("BENCH_NODES") != "" {
		nodes = benchNodeCounts()
	}
	npods := 10000
	if v, err := strconv.Atoi(os.Getenv("BENCH_PODS")); err == nil && v > 0 {
		npods = v
	}
	names := []string{"vgpu", "gpushare", "ascend", "mindcluster"}
	if v := os.Getenv("BENCH_BACKENDS"); v != "" {
		names = strings.Split(v, ",")
	}
	impls := []string{"noop", "floor", "ours"}
	if v := os.Getenv("BENCH_IMPLS"); v != "" {
		impls = strings.Split(v, ",")
	}
	for _, name := range names {
		dev, workload, ok := benchBackendNamed(name)
		if !ok {
			b.Fatalf("BENCH_BACKENDS=%s: backend %q: want vgpu, gpushare, ascend or mindcluster", os.Getenv("BENCH_BACKENDS"), name)
		}
		for _, n := range nodes {
			for _, impl := range impls {
				b.Run(fmt.Sprintf("backend=%s/nodes=%d/pods=%d/impl=%s", name, n, npods, impl), func(b *testing.B) {
					benchAllocateDevice(b, dev, impl, n, npods, workload)
				})
			}
		}
	}
}

// benchBackendNamed is the device type and the anonymous workload of the
// backend BENCH_BACKENDS names; ok is false for any other name.
func benchBackendNamed(name string) (benchDevice, benchWorkload, bool) {
	anonymous := func(pods func(int) ([]*v1.Pod, []string)) benchWorkload {
		return func(n int) ([]*v1.Pod, []*schedulingv1beta1.PodGroup) {
			p, groups := pods(n)
			return p, gangsOfFour(groups)
		}
	}
	switch name {
	case "vgpu":
		return vgpuBenchDevice(), anonymous(vgpuBenchPods), true
	case "gpushare":
		return benchDevice{
			conf:  func(policy string) string { return deviceBenchConf("deviceshare.GPUSharingEnable", policy) },
			node:  func(i int) *v1.Node { return gpuNode(fmt.Sprintf("n%04d", i), 8, 16000) },
			floor: floorResource{node: gpushareFloorNode, request: gpushareFloorRequest, reason: "node(s) didn't have enough free GPU share memory"},
		}, anonymous(benchPods), true
	case "ascend":
		return benchDevice{
			conf:  func(policy string) string { return deviceBenchConf("deviceshare.AscendHAMiVNPUEnable", policy) },
			node:  ascendBenchNode,
			floor: floorResource{node: ascendFloorNode, request: ascendFloorRequest, reason: "node(s) didn't have enough free Ascend vNPU memory"},
		}, anonymous(ascendBenchPods), true
	case "mindcluster":
		return benchDevice{
			conf: func(policy string) string { return deviceBenchConf("deviceshare.AscendMindClusterVNPUEnable", policy) },
			node: func(i int) *v1.Node {
				return mcNode(fmt.Sprintf("n%04d", i), 8, chipList(0, 1, 2, 3, 4, 5, 6, 7))
			},
			floor: floorResource{node: mindclusterFloorNode, request: mindclusterFloorRequest, reason: "node(s) didn't have enough free AI cores"},
		}, anonymous(mindclusterBenchPods), true
	}
	return benchDevice{}, nil, false
}

// gangPods is n pods in gangs of four, pod i built by pod(name, group, i).
func gangPods(n int, pod func(name, group string, i int) *v1.Pod) ([]*v1.Pod, []string) {
	pods := make([]*v1.Pod, 0, n)
	var groups []string
	for i := 0; i < n; i++ {
		group := fmt.Sprintf("pg%d", i/4)
		if i%4 == 0 {
			groups = append(groups, group)
		}
		pods = append(pods, pod(fmt.Sprintf("p%d", i), group, i))
	}
	return pods, groups
}

// ascendBenchNode is a node of 8 Ascend 310P cards (21,527 MiB, 7 vNPUs
// each) whose status shows the totals the plugin advertises, so the
// advertiser stays idle.
func ascendBenchNode(i int) *v1.Node {
	ids := make([]string, 8)
	for c := range ids {
		ids[c] = fmt.Sprintf("npu-%04d-%d", i, c)
	}
	return npuNode(fmt.Sprintf("n%04d", i), true, ids...)
}

// ascendBenchPods asks for one 310P vNPU each: the three templates' memory
// and whole cards, in a repeating mix.
func ascendBenchPods(n int) ([]*v1.Pod, []string) {
	mems := []int64{3072, 6144, 12288, 0, 3072, 6144}
	return gangPods(n, func(name, group string, i int) *v1.Pod { return npuPod(name, group, mems[i%len(mems)]) })
}

// mindclusterBenchPods asks for AI cores on 310P chips of 8: whole chips
// and the vir01, vir02 and vir04 templates, in a repeating mix. A node
// takes one template pod per session (mindclusterFloorNode), so most
// template pods, and their gangs, stay pending in both implementations.
func mindclusterBenchPods(n int) ([]*v1.Pod, []string) {
	cores := []int64{8, 2, 16, 8, 4, 8, 1, 16}
	return gangPods(n, func(name, group string, i int) *v1.Pod { return mcPod(name, group, cores[i%len(cores)]) })
}

// The floors below read only what the benchmark's nodes and pods carry: a
// node's cards start empty (the benchmark places no pods before the
// session), so unlike the vGPU floor they take nothing for pods already on
// the node.

// gpushareFloorNode is the node's cards from its allocatable: the card
// count and the memory spread evenly over them.
func gpushareFloorNode(ni *vcapi.NodeInfo) *floorNode {
	if ni.Node == nil {
		return nil
	}
	alloc := ni.Node.Status.Allocatable
	num, mem := alloc[gpushareproto.ResourceGPUNumber], alloc[gpushareproto.ResourceGPUMemory]
	if num.Value() <= 0 {
		return nil
	}
	return evenFloorNode(int(num.Value()), mem.Value()/num.Value())
}

// gpushareFloorRequest is one card with the pod's GPU memory per
// container, or whole cards for volcano.sh/gpu-number.
func gpushareFloorRequest(pod *v1.Pod) []floorContainer {
	var out []floorContainer
	for i := range pod.Spec.Containers {
		lim := pod.Spec.Containers[i].Resources.Limits
		if mem, ok := lim[gpushareproto.ResourceGPUMemory]; ok && mem.Value() > 0 {
			out = append(out, floorContainer{n: 1, mem: mem.Value()})
		} else if num, ok := lim[gpushareproto.ResourceGPUNumber]; ok && num.Value() > 0 {
			out = append(out, floorContainer{n: num.Value()})
		}
	}
	return out
}

// ascendFloorNode is the node's 310P cards from HAMi's registration.
func ascendFloorNode(ni *vcapi.NodeInfo) *floorNode {
	if ni.Node == nil {
		return nil
	}
	cards, err := ascendproto.DecodeRegister(ni.Node.Annotations[keys310P.Register])
	if err != nil || len(cards) == 0 {
		return nil
	}
	n := &floorNode{free: make([]int64, len(cards)), total: make([]int64, len(cards))}
	for i, c := range cards {
		n.total[i] = c.DevmemMiB
		if c.Healthy {
			n.free[i] = c.DevmemMiB
		}
	}
	return n
}

// ascendFloorRequest is the pod's 310P cards with their memory (0: whole
// cards) per container; HAMi's rounding up to a template is not done.
func ascendFloorRequest(pod *v1.Pod) []floorContainer {
	var out []floorContainer
	for i := range pod.Spec.Containers {
		lim := pod.Spec.Containers[i].Resources.Limits
		num, ok := lim[v1.ResourceName("huawei.com/"+chip310P)]
		if !ok || num.Value() <= 0 {
			continue
		}
		mem := lim[v1.ResourceName("huawei.com/"+chip310P+"-memory")]
		out = append(out, floorContainer{n: num.Value(), mem: mem.Value()})
	}
	return out
}

// mindclusterFloorNode is the node's offered chips, each with the AI cores
// its servertype label gives, taking one vNPU per session: MindCluster's
// device plugin creates one at a time per node, and ours waits for it
// (mindcluster.ReasonInFlight), so a floor without the rule would place
// pods no MindCluster plugin may place.
func mindclusterFloorNode(ni *vcapi.NodeInfo) *floorNode {
	if ni.Node == nil {
		return nil
	}
	per, err := mindclusterproto.ServerTypeCores(ni.Node.Labels[mindclusterproto.LabelServerType])
	if err != nil {
		return nil
	}
	chips, err := mindclusterproto.DecodeChips(ni.Node.Annotations[mindclusterproto.AnnotationFreeChips])
	if err != nil || len(chips) == 0 {
		return nil
	}
	n := evenFloorNode(len(chips), int64(per))
	n.oneSlice = true
	return n
}

// mindclusterFloorRequest is, per container, its AI cores on one chip
// when it asks for fewer than a chip's 8 (a template), else whole chips.
func mindclusterFloorRequest(pod *v1.Pod) []floorContainer {
	var out []floorContainer
	for i := range pod.Spec.Containers {
		q, ok := pod.Spec.Containers[i].Resources.Limits[mindclusterproto.ResourceNPUCore]
		switch {
		case !ok || q.Value() <= 0:
		case q.Value() < 8:
			out = append(out, floorContainer{n: 1, mem: q.Value(), slice: true})
		default:
			out = append(out, floorContainer{n: q.Value() / 8})
		}
	}
	return out
}

// evenFloorNode is n free cards of per each.
func evenFloorNode(n int, per int64) *floorNode {
	f := &floorNode{free: make([]int64, n), total: make([]int64, n)}
	for i := range f.free {
		f.free[i], f.total[i] = per, per
	}
	return f
}

// TestBackendFloors checks that each device type's floor is a device check
// for its resource: it keeps a pod off a node without room and accounts
// what it placed, and MindCluster's takes one vNPU per node per session.
func TestBackendFloors(t *testing.T) {
	tests := []struct {
		name    string
		backend string
		nodes   []*v1.Node
		pods    []*v1.Pod
		want    map[string]string // pod -> node, "" for unplaced
	}{{
		name:    "GPU share: no card with room, though the node has it",
		backend: "gpushare",
		nodes:   []*v1.Node{gpuNode("split", 2, 8000), gpuNode("one", 1, 16000)},
		pods:    []*v1.Pod{gpuMemPod("q", "g-q", 12000)},
		want:    map[string]string{"q": "one"},
	}, {
		name:    "GPU share: the node's total has room, no card has",
		backend: "gpushare",
		nodes:   []*v1.Node{gpuNode("split", 2, 8000)},
		pods:    []*v1.Pod{gpuMemPod("q", "g-q", 12000)},
		want:    map[string]string{"q": ""},
	}, {
		name:    "Ascend: the third pod finds no card with room",
		backend: "ascend",
		nodes:   []*v1.Node{npuNode("n", true, "npu-0", "npu-1")},
		pods:    []*v1.Pod{npuPod("a", "g-a", 12288), npuPod("b", "g-b", 12288), npuPod("c", "g-c", 12288)},
		want:    map[string]string{"a": "n", "b": "n", "c": ""},
	}, {
		name:    "MindCluster: one vNPU per node per session, whole chips beside it",
		backend: "mindcluster",
		nodes:   []*v1.Node{mcNode("n", 2, chipList(0, 1))},
		pods:    []*v1.Pod{mcPod("a", "g-a", 2), mcPod("b", "g-b", 2), mcPod("c", "g-c", 8)},
		want:    map[string]string{"a": "n", "b": "", "c": "n"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dev, _, ok := benchBackendNamed(tc.backend)
			if !ok {
				t.Fatalf("no backend %q", tc.backend)
			}
			got, fits := floorSession(t, floorBuilder(dev.floor), tc.nodes, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("floor: node per pod (-want +got):\n%s", diff)
			}
			for pod, node := range tc.want {
				if node == "" && !strings.Contains(fits[pod], dev.floor.reason) {
					t.Errorf("floor: pod %s unplaced with fit error %q, want it to say %q", pod, fits[pod], dev.floor.reason)
				}
			}
		})
	}
}
