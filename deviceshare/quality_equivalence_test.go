package deviceshare

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/util"

	"github.com/vgpushare/vshare/bench/quality"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// The placement-quality table (docs/quality.md) comes from bench/quality's
// simulator, which calls the vGPU backend directly. These tests check that
// it places every pod where Volcano's allocate action, with this plugin
// deciding the node order, places it: same node, same cards, same failures.
//
// Volcano breaks score ties at random (util.SelectBestNode); the simulator
// breaks them by a per-seed node permutation, the same distribution. Here
// a test plugin gives Volcano the simulator's rule through Volcano's own
// extension point for it (Session.BestNodeFn, which allocate consults
// before picking at random), so the two can be compared pod for pod.

// rankOrderPlugin is the BestNodeFn: the highest score, ties to the node
// with the smallest rank.
type rankOrderPlugin struct{ rank map[string]int }

func (p *rankOrderPlugin) Name() string { return "rankorder" }

func (p *rankOrderPlugin) OnSessionOpen(ssn *framework.Session) {
	ssn.AddBestNodeFn(p.Name(), func(_ *vcapi.TaskInfo, scores map[float64][]*vcapi.NodeInfo) *vcapi.NodeInfo {
		best, bestScore := (*vcapi.NodeInfo)(nil), math.Inf(-1)
		for s, nodes := range scores {
			for _, n := range nodes {
				if s > bestScore || s == bestScore && p.rank[n.Name] < p.rank[best.Name] {
					best, bestScore = n, s
				}
			}
		}
		return best
	})
}

func (p *rankOrderPlugin) OnSessionClose(*framework.Session) {}

// openbDir is where the openb files are: $VSHARE_OPENB_DIR, the vendored
// copy in bench/testdata/openb, or the workspace's shared copy.
func openbDir(t testing.TB) string {
	t.Helper()
	dirs := []string{filepath.Join("..", "bench", "testdata", "openb"), filepath.Join("..", "..", "shared", "traces", "openb")}
	if d := os.Getenv("VSHARE_OPENB_DIR"); d != "" {
		dirs = []string{d}
	}
	for _, d := range dirs {
		for _, f := range []string{"openb_node_list_gpu_node.csv", "openb_node_list_gpu_node.csv.gz"} {
			if _, err := os.Stat(filepath.Join(d, f)); err == nil {
				return d
			}
		}
	}
	if os.Getenv("VSHARE_QUALITY_REQUIRED") != "" {
		t.Fatalf("openb trace not found in %v (VSHARE_QUALITY_REQUIRED is set)", dirs)
	}
	t.Skipf("openb trace not found in %v", dirs)
	return ""
}

// sampleTrace keeps every step-th node of the trace, so that the 130%
// arrivals fill a cluster a session-per-pod test can afford while keeping
// the trace's mix of models and node sizes.
func sampleTrace(t testing.TB, name string, step int) *quality.Trace {
	t.Helper()
	tr, err := quality.LoadTrace(openbDir(t), name)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("openb trace %s: %v", name, err)
	}
	if err != nil {
		t.Fatal(err)
	}
	out := &quality.Trace{Name: name, Pods: tr.Pods}
	for i := 0; i < len(tr.Nodes); i += step {
		out.Nodes = append(out.Nodes, tr.Nodes[i])
	}
	return out
}

// TestSimulatorPlacesAsVolcano feeds the arrivals of one seed, one pod per
// session, to Volcano's enqueue and allocate actions with the plugin under
// SchedulePolicy fragment and binpack, and compares every outcome with the
// simulator's. The traces cover shares and whole cards (default), pods
// without GPUs strand cards (cpu250) and card-model selectors (gpuspec33).
func TestSimulatorPlacesAsVolcano(t *testing.T) {
	if testing.Short() || raceEnabled && os.Getenv("VSHARE_QUALITY_FULL") == "" {
		if os.Getenv("VSHARE_QUALITY_REQUIRED") != "" {
			t.Fatal("VSHARE_QUALITY_REQUIRED is set: run without -race and -short")
		}
		// make quality-check runs it, without the race detector.
		t.Skip("a session per pod for hundreds of pods: slow under -race or -short; set VSHARE_QUALITY_FULL=1 to run it")
	}
	tests := []struct {
		trace, policy string
		seed          int64
	}{
		{"default", "fragment", 42},
		{"cpu250", "fragment", 43},
		{"gpuspec33", "fragment", 44},
		{"multigpu50", "binpack", 45},
	}
	for _, tc := range tests {
		t.Run(tc.trace+"/"+tc.policy, func(t *testing.T) {
			tr := sampleTrace(t, tc.trace, 35)
			f, err := quality.FactoryFor(tc.policy)
			if err != nil {
				t.Fatal(err)
			}
			arr, want, err := quality.Placements(tr, f, tc.seed)
			if err != nil {
				t.Fatal(err)
			}
			got := placeInSessions(t, tr, arr, tc.policy)
			failed, placed := 0, 0
			for i := range want {
				w, g := want[i], got[i]
				if !w.OK {
					failed++
				} else {
					placed++
				}
				if w.OK != g.OK || w.OK && (w.Node != g.Node || fmt.Sprint(w.Cards) != fmt.Sprint(g.Cards)) {
					p := &arr.Pods[i]
					t.Fatalf("arrival %d (pod %s: cpu %dm, memory %d MiB, %d x %d milli GPU, models %v): simulator %s, Volcano session %s",
						i, p.Name, p.CPU, p.Memory, p.NumGPU, p.Milli, p.Spec, describe(tr, w), describe(tr, g))
				}
			}
			// The comparison means something only if the cluster filled
			// up: some pods must have failed for lack of room.
			if failed == 0 || placed == 0 {
				t.Fatalf("%d arrivals placed and %d failed: the sample does not exercise a full cluster", placed, failed)
			}
			t.Logf("%d nodes, %d arrivals: %d placed, %d failed, all as the simulator placed them", len(tr.Nodes), len(want), placed, failed)
		})
	}
}

func describe(tr *quality.Trace, p quality.Placement) string {
	if !p.OK {
		return "fails it"
	}
	return fmt.Sprintf("places it on %s cards %v", tr.Nodes[p.Node].Name, p.Cards)
}

// placeInSessions runs one session per arrival and returns where each pod
// was bound, reading the cards from the binding's vgpu-ids-new.
func placeInSessions(t testing.TB, tr *quality.Trace, arr *quality.Arrivals, policy string) []quality.Placement {
	return placeInSessionsWith(t, tr, arr, aloneConf(policy, true))
}

// aloneConf is a scheduler configuration in which the plugin, under
// policy, decides the node order alone (no nodeorder or binpack plugin),
// with the rankorder tie-break ahead of it when rankOrder is set.
func aloneConf(policy string, rankOrder bool) string {
	first := ""
	if rankOrder {
		first = "  - name: rankorder\n"
	}
	return `
actions: "enqueue, allocate"
tiers:
- plugins:
` + first + `  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: ` + policy + `
      deviceshare.ScheduleWeight: 10
`
}

// placeInSessionsWith is placeInSessions under a scheduler configuration,
// which must enable the rankorder plugin.
func placeInSessionsWith(t testing.TB, tr *quality.Trace, arr *quality.Arrivals, schedulerConf string) []quality.Placement {
	t.Helper()
	nodes := make([]*v1.Node, len(tr.Nodes))
	rank := make(map[string]int, len(tr.Nodes))
	index := make(map[string]int, len(tr.Nodes))
	for i := range tr.Nodes {
		n := quality.VGPUNode(i, &tr.Nodes[i])
		// See vgpuNode in vgpu_session_test.go: Volcano's own vGPU
		// devices leave a node alone with this handshake.
		n.Annotations[vgpuproto.AnnotationHandshake] = "Requesting_2099.01.01 00:00:00"
		n.Status.Allocatable[v1.ResourcePods] = *resource.NewQuantity(100000, resource.DecimalSI)
		nodes[i] = n
		rank[n.Name] = arr.Rank[i]
		index[n.Name] = i
	}
	ro := &rankOrderPlugin{rank: rank}
	framework.RegisterPluginBuilder(ro.Name(), func(framework.Arguments) framework.Plugin { return ro })
	c := newCluster(t, schedulerConf, nodes, nil)
	out := make([]quality.Placement, len(arr.Pods))
	for i := range arr.Pods {
		pod := quality.VGPUPod(&arr.Pods[i], i+1)
		group := "pg-" + strconv.Itoa(i+1)
		pod.Spec.SchedulerName = "volcano"
		pod.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey] = group
		pod.Status.Phase = v1.PodPending
		pod.CreationTimestamp = metav1.NewTime(testTime.Add(time.Duration(i) * time.Second))
		pg := util.BuildPodGroup(group, pod.Namespace, "default", 1, nil, schedulingv1beta1.PodGroupInqueue)
		c.addJob(pg, pod)
		allocated := false
		c.session(func(ssn *framework.Session) {
			for _, j := range ssn.Jobs {
				if task, ok := j.Tasks[vcapi.TaskID(pod.UID)]; ok {
					allocated = task.NodeName != ""
				}
			}
		})
		if !allocated {
			// The simulator does not retry a pod that fit nowhere.
			c.cache.DeletePod(pod)
			c.cache.DeletePodGroupV1beta1(pg)
			continue
		}
		b := c.waitBinds(1)[pod.Namespace+"/"+pod.Name]
		n, ok := index[b.Node]
		if !ok {
			t.Fatalf("pod %s bound to unknown node %q", pod.Name, b.Node)
		}
		var cards []int
		if arr.Pods[i].NumGPU > 0 {
			var err error
			if cards, err = quality.CardsOf(b.Annotations[vgpuproto.AnnotationIDs], n); err != nil {
				t.Fatalf("pod %s: %v", pod.Name, err)
			}
		}
		out[i] = quality.Placement{Node: n, Cards: cards, OK: true}
		c.confirmBinds(pod)
	}
	return out
}
