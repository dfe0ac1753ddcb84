package deviceshare

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	"volcano.sh/volcano/pkg/scheduler"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// floorReason is the vGPU floor's fit error, in kube-scheduler's words.
const floorReason = "node(s) didn't have enough free vGPU memory"

// floorPlugin is the cheapest device check Volcano v1.10 allows, the
// benchmark's floor for a device plugin (impl=floor, issue 36): one integer
// of free memory per card, a predicate that rejects a node without room
// for the pod, and an event handler that takes the memory on allocate and
// gives it back on deallocate. It scores nothing beyond Volcano's, checks
// no core share, card type, mode or sharing count, and writes nothing on
// the pod. Unlike noopPlugin, which places pods without looking at cards,
// it makes Volcano do what it does for every node a device check rejects
// (a FitError per node, a node that does not count towards the feasible
// nodes Volcano looks for), so ours / floor is ours' cost beyond what any
// device plugin pays under Volcano. What it reads of nodes and pods is
// its resource's (floorResource): vGPU memory here, GPU share memory,
// Ascend vNPU memory and MindCluster AI cores in bench_backends_test.go.
//
// A builder makes one per session. The cards are decoded once per node at
// session open, the pods' requests once per task; after that the predicate
// (run by Volcano on 16 goroutines) only reads, and the event handlers,
// which Volcano calls from the action's goroutine between predicate
// passes, write.
type floorPlugin struct {
	res   floorResource
	nodes map[string]*floorNode
	reqs  map[vcapi.TaskID][]floorContainer
	taken map[vcapi.TaskID]floorAlloc
}

// floorResource is what a floor reads for one device resource: a node's
// cards with what the pods on it hold taken (nil for a node without such
// cards), a pod's request per container (nil: none), and its fit error.
type floorResource struct {
	node    func(*vcapi.NodeInfo) *floorNode
	request func(*v1.Pod) []floorContainer
	reason  string
}

// vgpuFloor is the vGPU floor: card memory from the node's registration.
func vgpuFloor() floorResource {
	return floorResource{node: newFloorNode, request: floorRequest, reason: floorReason}
}

// floorNode is a node's cards: free and total memory (MiB) per card, in
// registration order.
type floorNode struct {
	free, total []int64
	// oneSlice admits one slice (a request for part of a card) per session
	// on the node, as MindCluster's device plugin creates one vNPU at a
	// time per node; slices counts the session's slices.
	oneSlice bool
	slices   int
}

// floorContainer is one container's request: n cards with mem MiB each
// (0: a whole card, as for a pod without volcano.sh/vgpu-memory).
type floorContainer struct {
	n, mem int64
	// slice marks a request for part of a card (see floorNode.oneSlice).
	slice bool
}

// floorTake is the memory a pod took from one card.
type floorTake struct {
	card int
	mem  int64
}

// floorAlloc is what an allocated task took, to give back on deallocate.
type floorAlloc struct {
	node  string
	takes []floorTake
	slice bool
}

func newFloorPlugin(framework.Arguments) framework.Plugin { return &floorPlugin{res: vgpuFloor()} }

// floorBuilder builds the floor of the resource.
func floorBuilder(res floorResource) framework.PluginBuilder {
	return func(framework.Arguments) framework.Plugin { return &floorPlugin{res: res} }
}

func (*floorPlugin) Name() string { return PluginName }

func (f *floorPlugin) OnSessionOpen(ssn *framework.Session) {
	f.nodes = make(map[string]*floorNode, len(ssn.Nodes))
	for name, ni := range ssn.Nodes {
		if n := f.res.node(ni); n != nil {
			f.nodes[name] = n
		}
	}
	f.reqs = map[vcapi.TaskID][]floorContainer{}
	f.taken = map[vcapi.TaskID]floorAlloc{}
	for _, job := range ssn.Jobs {
		for id, task := range job.Tasks {
			if r := f.res.request(task.Pod); r != nil {
				f.reqs[id] = r
			}
		}
	}
	ssn.AddPredicateFn(PluginName, f.predicate)
	ssn.AddEventHandler(&framework.EventHandler{AllocateFunc: f.allocate, DeallocateFunc: f.deallocate})
}

func (*floorPlugin) OnSessionClose(*framework.Session) {}

// newFloorNode decodes the node's vGPU registration (nil when it has none
// or it does not decode) and takes from each card what the pods already on
// the node hold (volcano.sh/vgpu-ids-new).
func newFloorNode(ni *vcapi.NodeInfo) *floorNode {
	if ni.Node == nil {
		return nil
	}
	cards, err := vgpuproto.DecodeRegister(ni.Node.Annotations[vgpuproto.AnnotationRegister])
	if err != nil || len(cards) == 0 {
		return nil
	}
	n := &floorNode{free: make([]int64, len(cards)), total: make([]int64, len(cards))}
	index := make(map[string]int, len(cards))
	for i, c := range cards {
		index[c.UUID] = i
		n.total[i] = c.MemMiB
		if c.Healthy {
			n.free[i] = c.MemMiB
		}
	}
	for _, t := range ni.Tasks {
		containers, err := vgpuproto.DecodeAllocation(t.Pod.Annotations[vgpuproto.AnnotationIDs])
		if err != nil {
			continue
		}
		for _, devs := range containers {
			for _, d := range devs {
				if i, ok := index[d.UUID]; ok {
					n.free[i] -= d.Mem
				}
			}
		}
	}
	return n
}

// floorRequest is the pod's vGPU request per container (limits, as
// extended resources require), or nil when it asks for no vGPU.
func floorRequest(pod *v1.Pod) []floorContainer {
	var out []floorContainer
	for i := range pod.Spec.Containers {
		lim := pod.Spec.Containers[i].Resources.Limits
		num, ok := lim[vgpuproto.ResourceNumber]
		if !ok || num.Value() <= 0 {
			continue
		}
		mem := lim[vgpuproto.ResourceMemory]
		out = append(out, floorContainer{n: num.Value(), mem: mem.Value()})
	}
	return out
}

// plan places the containers first fit: for each, its n cards, each with
// at least its memory free once the pod's earlier containers took theirs.
// It appends the takes to out and reports whether every container found
// its cards; the node is not changed.
func (n *floorNode) plan(reqs []floorContainer, out []floorTake) ([]floorTake, bool) {
	if n.oneSlice && n.slices > 0 && sliced(reqs) {
		return out, false
	}
	for _, r := range reqs {
		start, got := len(out), int64(0)
		for c := 0; c < len(n.free) && got < r.n; c++ {
			mem := r.mem
			if mem == 0 {
				mem = n.total[c]
			}
			free := n.free[c]
			for _, t := range out[:start] {
				if t.card == c {
					free -= t.mem
				}
			}
			if free >= mem {
				out = append(out, floorTake{card: c, mem: mem})
				got++
			}
		}
		if got < r.n {
			return out, false
		}
	}
	return out, true
}

// sliced reports whether a container asks for part of a card.
func sliced(reqs []floorContainer) bool {
	for _, r := range reqs {
		if r.slice {
			return true
		}
	}
	return false
}

// predicate rejects a node whose cards cannot take the pod.
func (f *floorPlugin) predicate(task *vcapi.TaskInfo, node *vcapi.NodeInfo) error {
	reqs := f.reqs[task.UID]
	if reqs == nil {
		return nil
	}
	var buf [16]floorTake
	if n := f.nodes[node.Name]; n != nil {
		if _, ok := n.plan(reqs, buf[:0]); ok {
			return nil
		}
	}
	return vcapi.NewFitError(task, node, f.res.reason)
}

// allocate takes the pod's memory on the node Volcano allocated it to.
func (f *floorPlugin) allocate(e *framework.Event) {
	reqs := f.reqs[e.Task.UID]
	n := f.nodes[e.Task.NodeName]
	if reqs == nil || n == nil {
		return
	}
	takes, ok := n.plan(reqs, nil)
	if !ok {
		// Volcano allocates only to a node the predicate passed, in the
		// same goroutine; a pod that no longer fits is not accounted.
		return
	}
	for _, t := range takes {
		n.free[t.card] -= t.mem
	}
	a := floorAlloc{node: e.Task.NodeName, takes: takes, slice: sliced(reqs)}
	if a.slice {
		n.slices++
	}
	f.taken[e.Task.UID] = a
}

// deallocate gives back what allocate took.
func (f *floorPlugin) deallocate(e *framework.Event) {
	a, ok := f.taken[e.Task.UID]
	if !ok {
		return
	}
	delete(f.taken, e.Task.UID)
	n := f.nodes[a.node]
	if a.slice {
		n.slices--
	}
	for _, t := range a.takes {
		n.free[t.card] += t.mem
	}
}

// TestFloorPlugin checks that the floor is a device check: it keeps a pod
// off a node whose cards lack its memory, and it accounts what it
// allocated, so two pods that together exceed a card do not both land on
// it. The same cases under noopPlugin place every pod, which shows each
// case tells the floor from noop.
func TestFloorPlugin(t *testing.T) {
	card := func(node string, i int, mem int64) vcard {
		return vcard{uuid: fmt.Sprintf("GPU-%s-%d", node, i), typ: "NVIDIA-A100-SXM4-80GB", mem: mem}
	}
	tests := []struct {
		name  string
		nodes []*v1.Node
		pods  []*v1.Pod
		// want is each pod's node under the floor ("" for unplaced);
		// noop places every pod somewhere.
		want map[string]string
	}{{
		name:  "a node without room is rejected",
		nodes: []*v1.Node{vgpuNode("small", card("small", 0, 8000), card("small", 1, 8000)), vgpuNode("big", card("big", 0, 16000))},
		pods:  []*v1.Pod{vgpuPod("p", "g-p", 1, 12000, 0)},
		want:  map[string]string{"p": "big"},
	}, {
		name:  "too few cards with room",
		nodes: []*v1.Node{vgpuNode("n", card("n", 0, 16000), card("n", 1, 4000))},
		pods:  []*v1.Pod{vgpuPod("p", "g-p", 2, 8000, 0)},
		want:  map[string]string{"p": ""},
	}, {
		name:  "two pods that together exceed the card",
		nodes: []*v1.Node{vgpuNode("n", card("n", 0, 16000))},
		pods:  []*v1.Pod{vgpuPod("a", "g-a", 1, 10000, 0), vgpuPod("b", "g-b", 1, 10000, 0)},
		want:  map[string]string{"a": "n", "b": ""},
	}, {
		name:  "two pods that together fit",
		nodes: []*v1.Node{vgpuNode("n", card("n", 0, 16000))},
		pods:  []*v1.Pod{vgpuPod("a", "g-a", 1, 8000, 0), vgpuPod("b", "g-b", 1, 8000, 0)},
		want:  map[string]string{"a": "n", "b": "n"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, fits := floorSession(t, newFloorPlugin, tc.nodes, tc.pods)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("floor: node per pod (-want +got):\n%s", diff)
			}
			for pod, node := range tc.want {
				if node == "" && !strings.Contains(fits[pod], floorReason) {
					t.Errorf("floor: pod %s unplaced with fit error %q, want it to say %q", pod, fits[pod], floorReason)
				}
			}
			noop, _ := floorSession(t, func(framework.Arguments) framework.Plugin { return noopPlugin{} }, tc.nodes, tc.pods)
			for pod, node := range noop {
				if node == "" {
					t.Errorf("noop left pod %s unplaced; the case does not tell the floor from noop", pod)
				}
			}
		})
	}
}

// floorSession runs one allocate session over the nodes and pods (each pod
// its own gang of one) with the builder registered as deviceshare, in the
// benchmark's tiers, and returns each pod's node ("" when unplaced) and
// fit error.
func floorSession(t *testing.T, build framework.PluginBuilder, nodes []*v1.Node, pods []*v1.Pod) (map[string]string, map[string]string) {
	t.Helper()
	framework.RegisterPluginBuilder(PluginName, build)
	_, tiers, configs, _, err := scheduler.UnmarshalSchedulerConf(vgpuBenchConf("binpack"))
	if err != nil {
		t.Fatal(err)
	}
	// The cache and the session change the objects they are given: each
	// session gets its own.
	nodes, pods = deepCopies(nodes), deepCopies(pods)
	var groups []*schedulingv1beta1.PodGroup
	for _, p := range pods {
		groups = append(groups, podGroup(p.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey], 1))
	}
	sc := benchCache(t, nodes, pods, groups, false)
	allocate, _ := framework.GetAction("allocate")
	nodeOf, fits := map[string]string{}, map[string]string{}
	for _, p := range pods {
		nodeOf[p.Name] = ""
	}
	runAllocateInspect(sc, tiers, configs, allocate, func(ssn *framework.Session) {
		for _, job := range ssn.Jobs {
			for _, task := range job.TaskStatusIndex[vcapi.Binding] {
				nodeOf[task.Name] = task.NodeName
			}
		}
		for _, p := range pods {
			fits[p.Name] = fitMessage(ssn, p)
		}
	})
	return nodeOf, fits
}

// deepCopies returns a deep copy of each object.
func deepCopies[T interface{ DeepCopy() T }](objs []T) []T {
	out := make([]T, len(objs))
	for i, o := range objs {
		out[i] = o.DeepCopy()
	}
	return out
}
