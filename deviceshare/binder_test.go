package deviceshare

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// Notes nobody claims (a pipelined task is never bound) are dropped once
// they are older than intentTTL; fresh ones stay.
func TestBinderDropsUnclaimedNotes(t *testing.T) {
	clk := testingclock.NewFakeClock(testTime)
	st := newTestState(Options{Clock: clk})
	defer st.Close()
	b := st.binder
	b.annotate("stale", "n1", map[string]string{"k": "v"}, nil, nil, nil)
	clk.Step(intentTTL + time.Second)
	b.annotate("fresh", "n1", map[string]string{"k": "v"}, nil, nil, nil)
	if n := b.take("other"); n != nil {
		t.Fatalf("take of an unknown task = %+v, want nil", n)
	}
	if b.annotationsFor("stale") != nil {
		t.Error("a note older than intentTTL was kept")
	}
	if b.annotationsFor(vcapi.TaskID("fresh")) == nil {
		t.Error("a fresh note was dropped")
	}
	if n := b.take("fresh"); n == nil || n.annotations["k"] != "v" {
		t.Errorf("take(fresh) = %+v, want its note", n)
	}
}

// A bind whose allocation was made on an inventory the node has since
// replaced (here a card reported unhealthy, read at a later session's open)
// is refused, sends nothing to the API server, and is counted; on the
// current inventory it goes ahead.
func TestBinderRefusesAllocationOnAStaleInventory(t *testing.T) {
	b := shareBackend(t)
	reg := prometheus.NewRegistry()
	st := newTestState(Options{Registerer: reg})
	defer st.Close()
	node := gpuNode("n1", 2, 8000)
	st.ledger.Sync(nodeInfo(t, node), []device.Backend{b})
	gen, ok := st.ledger.inventoryGen("n1", b.Name())
	if !ok {
		t.Fatal("the ledger has no inventory for n1 after a sync")
	}
	stamp := []inventoryStamp{{backend: b.Name(), gen: gen}}
	a, c := gpuMemPod("a", "pg", 1000), gpuMemPod("c", "pg", 1000)
	client := fake.NewSimpleClientset(a, c)
	bind := func(pod *v1.Pod) map[vcapi.TaskID]string {
		task := vcapi.NewTaskInfo(pod)
		task.NodeName = "n1"
		st.binder.annotate(task.UID, "n1", map[string]string{"k": "v"}, nil, nil, stamp)
		return st.binder.Bind(client, []*vcapi.TaskInfo{task})
	}
	if errs := bind(a); len(errs) != 0 {
		t.Fatalf("bind on the inventory the allocation was made on: %v", errs)
	}
	unhealthy := node.DeepCopy()
	unhealthy.Annotations[gpushareproto.AnnotationUnhealthyIDs] = "0"
	st.ledger.Sync(nodeInfo(t, unhealthy), []device.Backend{b})
	before := len(client.Actions())
	errs := bind(c)
	if msg := errs[vcapi.TaskID(c.UID)]; !strings.Contains(msg, "node n1 reported a new "+b.Name()+" inventory") {
		t.Fatalf("bind after the node's inventory changed: errors %v, want a refusal naming the node and device", errs)
	}
	if n := len(client.Actions()) - before; n != 0 {
		t.Errorf("the refused bind made %d API requests, want none", n)
	}
	if got := testutil.ToFloat64(st.metrics.staleBinds); got != 1 {
		t.Errorf("stale-inventory refusals counted %v, want 1", got)
	}
}
