package nodestate

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/backends/gpushare"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/bind"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"volcano.sh/volcano/pkg/scheduler/util"
)

// countingBackend counts inventory decodes.
type countingBackend struct {
	device.Backend
	decodes int
}

func (c *countingBackend) NewDevices(node *v1.Node) (device.Devices, error) {
	c.decodes++
	return c.Backend.NewDevices(node)
}

func shareBackend(t *testing.T) *countingBackend {
	t.Helper()
	b, err := gpushare.New(gpushare.Options{Mode: gpushare.ModeShare})
	if err != nil {
		t.Fatal(err)
	}
	return &countingBackend{Backend: b}
}

// runningPod is a pod placed on node with the given gpu-index.
func runningPod(name, node, index string, mib int64) *v1.Pod {
	p := gpuMemPod(name, "pg", mib)
	p.Spec.NodeName = node
	p.Status.Phase = v1.PodRunning
	if index != "" {
		p.Annotations[gpushareproto.AnnotationGPUIndex] = index
	}
	return p
}

func nodeInfo(t *testing.T, node *v1.Node, pods ...*v1.Pod) map[string]*vcapi.NodeInfo {
	t.Helper()
	ni := vcapi.NewNodeInfo(node)
	for _, p := range pods {
		if err := ni.AddTask(vcapi.NewTaskInfo(p)); err != nil {
			t.Fatal(err)
		}
	}
	return map[string]*vcapi.NodeInfo{node.Name: ni}
}

func storeCards(t *testing.T, l *Store, node string, b device.Backend) []int64 {
	t.Helper()
	view, _, _ := l.View()
	d, ok := view[node][b.Name()].Devices.(*gpushare.Devices)
	if !ok {
		t.Fatalf("node %s has no %s devices in the ledger", node, b.Name())
	}
	var used []int64
	for _, c := range d.Cards() {
		used = append(used, c.UsedMemory)
	}
	return used
}

func TestLedgerDecodesInventoryOnlyWhenItChanges(t *testing.T) {
	b := shareBackend(t)
	l := New(testingclock.NewFakeClock(testTime), bind.NewDecisions(nil))
	node := gpuNode("n1", 2, 8000)
	a := runningPod("a", "n1", "1", 3000)
	for i := 0; i < 3; i++ {
		l.Sync(nodeInfo(t, node, a), []device.Backend{b})
	}
	if b.decodes != 1 {
		t.Errorf("decodes after 3 unchanged syncs = %d, want 1", b.decodes)
	}
	changed := node.DeepCopy()
	changed.Annotations[gpushareproto.AnnotationUnhealthyIDs] = "0"
	res := l.Sync(nodeInfo(t, changed, a), []device.Backend{b})
	if b.decodes != 2 || res.Decoded != 1 {
		t.Errorf("decodes after a change = %d (sync says %d), want 2 (1)", b.decodes, res.Decoded)
	}
	// The pods are accounted again on the new inventory.
	if diff := cmp.Diff([]int64{0, 3000}, storeCards(t, l, "n1", b)); diff != "" {
		t.Errorf("card usage after re-decode (-want +got):\n%s", diff)
	}
}

func TestLedgerAccountsAddedChangedAndVanishedPods(t *testing.T) {
	b := shareBackend(t)
	l := New(testingclock.NewFakeClock(testTime), bind.NewDecisions(nil))
	node := gpuNode("n1", 2, 8000)
	a, c := runningPod("a", "n1", "0", 3000), runningPod("c", "n1", "1", 2000)

	l.Sync(nodeInfo(t, node, a, c), []device.Backend{b})
	if diff := cmp.Diff([]int64{3000, 2000}, storeCards(t, l, "n1", b)); diff != "" {
		t.Errorf("after both pods (-want +got):\n%s", diff)
	}
	// A status-only update (new object, same allocation) changes nothing.
	a2 := a.DeepCopy()
	a2.Status.Message = "ok"
	res := l.Sync(nodeInfo(t, node, a2, c), []device.Backend{b})
	if res.Added != 0 || res.Removed != 0 {
		t.Errorf("status-only update re-accounted: %+v", res)
	}
	// The pod finishes: it holds nothing any more.
	done := a2.DeepCopy()
	done.Status.Phase = v1.PodSucceeded
	l.Sync(nodeInfo(t, node, done, c), []device.Backend{b})
	if diff := cmp.Diff([]int64{0, 2000}, storeCards(t, l, "n1", b)); diff != "" {
		t.Errorf("after a finished (-want +got):\n%s", diff)
	}
	// c is deleted.
	l.Sync(nodeInfo(t, node), []device.Backend{b})
	if diff := cmp.Diff([]int64{0, 0}, storeCards(t, l, "n1", b)); diff != "" {
		t.Errorf("after c deleted (-want +got):\n%s", diff)
	}
	// The node leaves the cluster.
	l.Sync(map[string]*vcapi.NodeInfo{}, []device.Backend{b})
	if got := l.Stats().Nodes; got != 0 {
		t.Errorf("nodes after removal = %d, want 0", got)
	}
}

func TestLedgerRejectsMalformedAllocationOnce(t *testing.T) {
	b := shareBackend(t)
	l := New(testingclock.NewFakeClock(testTime), bind.NewDecisions(nil))
	node := gpuNode("n1", 2, 8000)
	bad := runningPod("bad", "n1", "seven", 3000)
	good := runningPod("good", "n1", "0", 1000)
	res := l.Sync(nodeInfo(t, node, bad, good), []device.Backend{b})
	if res.Rejected != 1 || res.Added != 1 {
		t.Errorf("first sync = %+v, want 1 rejected and 1 added", res)
	}
	res = l.Sync(nodeInfo(t, node, bad, good), []device.Backend{b})
	if res.Rejected != 0 {
		t.Errorf("an unchanged malformed pod was tried again: %+v", res)
	}
	if got := l.Stats().RejectedPods; got != 1 {
		t.Errorf("rejected pods = %d, want 1", got)
	}
	if diff := cmp.Diff([]int64{1000, 0}, storeCards(t, l, "n1", b)); diff != "" {
		t.Errorf("card usage (-want +got):\n%s", diff)
	}
}

func TestLedgerInvalidInventoryIsReported(t *testing.T) {
	b := shareBackend(t)
	l := New(testingclock.NewFakeClock(testTime), bind.NewDecisions(nil))
	node := gpuNode("n1", 2, 8000)
	node.Annotations[gpushareproto.AnnotationUnhealthyIDs] = "zero"
	l.Sync(nodeInfo(t, node), []device.Backend{b})
	view, _, _ := l.View()
	v := view["n1"][b.Name()]
	if v.Devices != nil || v.InvErr == nil || !strings.Contains(v.InvErr.Error(), gpushareproto.AnnotationUnhealthyIDs) {
		t.Errorf("view = %+v, want no devices and an error naming %s", v, gpushareproto.AnnotationUnhealthyIDs)
	}
	if got := l.Stats().InvalidInventories; got != 1 {
		t.Errorf("invalid inventories = %d, want 1", got)
	}
}

func TestLedgerAssumptionLifecycle(t *testing.T) {
	b := shareBackend(t)
	l := New(testingclock.NewFakeClock(testTime), bind.NewDecisions(nil))
	node := gpuNode("n1", 2, 8000)
	inFlight := runningPod("p", "n1", "", 5000) // bound, annotations not seen yet
	l.Sync(nodeInfo(t, node), []device.Backend{b})
	l.decisions.Record(inFlight.UID, bind.Decision{Node: "n1", Annotations: map[string]string{gpushareproto.AnnotationGPUIndex: "1", gpushareproto.AnnotationPredicateTime: "1"}, Assumed: true})

	res := l.Sync(nodeInfo(t, node, inFlight), []device.Backend{b})
	if res.Assumed != 1 {
		t.Errorf("assumed = %d, want 1", res.Assumed)
	}
	if diff := cmp.Diff([]int64{0, 5000}, storeCards(t, l, "n1", b)); diff != "" {
		t.Errorf("in flight (-want +got):\n%s", diff)
	}
	// The informer brings the annotations: same usage, assumption gone.
	confirmed := runningPod("p", "n1", "1", 5000)
	confirmed.Annotations[gpushareproto.AnnotationPredicateTime] = "1"
	res = l.Sync(nodeInfo(t, node, confirmed), []device.Backend{b})
	if res.Confirmed != 1 || res.Assumed != 0 {
		t.Errorf("after confirmation = %+v, want 1 confirmed, 0 assumed", res)
	}
	if diff := cmp.Diff([]int64{0, 5000}, storeCards(t, l, "n1", b)); diff != "" {
		t.Errorf("confirmed (-want +got):\n%s", diff)
	}

	// A bind that fails: the pod is not on the node in the next snapshot.
	l.decisions.Record("uid-q", bind.Decision{Node: "n1", Annotations: map[string]string{gpushareproto.AnnotationGPUIndex: "0"}, Assumed: true})
	res = l.Sync(nodeInfo(t, node, confirmed), []device.Backend{b})
	if res.Dropped != 1 || l.Stats().Assumed != 0 {
		t.Errorf("after a failed bind = %+v, want the assumption dropped", res)
	}
}

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// gpuNode is a node with GPU share cards of memPerCard MiB.
func gpuNode(name string, cards int, memPerCard int64) *v1.Node {
	res := v1.ResourceList{v1.ResourceCPU: resource.MustParse("64"), v1.ResourceMemory: resource.MustParse("256Gi")}
	if cards > 0 {
		res[gpushareproto.ResourceGPUNumber] = *resource.NewQuantity(int64(cards), resource.DecimalSI)
		res[gpushareproto.ResourceGPUMemory] = *resource.NewQuantity(int64(cards)*memPerCard, resource.DecimalSI)
	}
	return util.BuildNode(name, res, nil)
}

// gpuMemPod is a pending pod asking for mib of GPU share memory.
func gpuMemPod(name, group string, mib int64) *v1.Pod {
	lim := v1.ResourceList{gpushareproto.ResourceGPUMemory: *resource.NewQuantity(mib, resource.DecimalSI)}
	p := util.BuildPod("ns", name, "", v1.PodPending, lim, group, nil, nil)
	p.UID = types.UID("uid-" + name)
	p.Spec.Containers[0].Resources.Limits = lim.DeepCopy()
	return p
}
