package bind

import (
	"errors"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	testingclock "k8s.io/utils/clock/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

var testTime = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// Decisions nobody binds or accounts (a pipelined task is never bound) are
// dropped once they are older than intentTTL; fresh ones stay, and so do
// assumed ones, which the node state settles.
func TestDecisionsDropUnclaimedOnes(t *testing.T) {
	clk := testingclock.NewFakeClock(testTime)
	ds := New(Options{Clock: clk}).Decisions
	ds.Record("stale", Decision{Node: "n1", Annotations: map[string]string{"k": "v"}})
	ds.Record("assumed", Decision{Node: "n1", Annotations: map[string]string{"k": "v"}, Assumed: true})
	clk.Step(intentTTL + time.Second)
	ds.Record("fresh", Decision{Node: "n1", Annotations: map[string]string{"k": "v"}})
	if d := ds.claim("other"); d != nil {
		t.Fatalf("claim of an unknown pod = %+v, want nil", d)
	}
	if ds.AnnotationsFor("stale") != nil {
		t.Error("an unassumed decision older than intentTTL was kept")
	}
	if ds.AnnotationsFor("fresh") == nil || ds.Assumed("assumed") == nil {
		t.Error("a fresh or an assumed decision was dropped")
	}
	if d := ds.claim("fresh"); d == nil || d.Annotations["k"] != "v" {
		t.Errorf("claim(fresh) = %+v, want its decision", d)
	}
	if d := ds.claim("fresh"); d != nil {
		t.Errorf("second claim(fresh) = %+v, want nil", d)
	}
}

// One record per decision: the bind claims an assumed decision without
// ending it, so the ledger keeps accounting the allocation until it settles
// it (the pod shows it) or finds the pod gone from the node.
func TestAssumedDecisionOutlivesItsBindUntilSettled(t *testing.T) {
	ds := New(Options{}).Decisions
	ds.Record("a", Decision{Node: "n1", Annotations: map[string]string{"k": "v"}, Assumed: true})
	ds.Record("b", Decision{Node: "n1", Annotations: map[string]string{"k": "w"}, Assumed: true})
	if d := ds.claim("a"); d == nil {
		t.Fatal("claim(a) = nil, want the decision")
	}
	if ds.Assumed("a") == nil {
		t.Fatal("a claimed assumed decision ended at its bind")
	}
	ds.Settle("a")
	if ds.Assumed("a") != nil {
		t.Error("a settled decision is still assumed")
	}
	if dropped, remaining := ds.SettleUnseen(map[types.UID]bool{}); dropped != 1 || remaining != 0 {
		t.Errorf("SettleUnseen = %d dropped, %d remaining; want 1, 0", dropped, remaining)
	}
	ds.Record("c", Decision{Node: "n1", Annotations: map[string]string{"k": "x"}, Assumed: true})
	ds.Forget("c")
	if ds.CountAssumed() != 0 {
		t.Errorf("%d decisions assumed after Forget, want 0", ds.CountAssumed())
	}
}

// inventories is a ledger's view with settable generations.
type inventories map[string]uint64

func (v inventories) InventoryGen(node, backend string) (uint64, bool) {
	g, ok := v[node+"/"+backend]
	return g, ok
}

// A bind whose allocation was made on an inventory the node has since
// replaced (a card reported unhealthy, read at a later session's open) is
// refused, sends nothing to the API server, and is counted; on the current
// inventory it goes ahead. A refusal recorded by the session fails the bind
// with its reason.
func TestBinderRefusesAllocationOnAStaleInventory(t *testing.T) {
	inv := inventories{"n1/gpushare": 1}
	refused := 0
	b := New(Options{Inventories: inv, Metrics: Metrics{InventoryRefused: func() { refused++ }}})
	a, c, r := phasePod("a", ""), phasePod("c", ""), phasePod("r", "")
	client := fake.NewSimpleClientset(a, c, r)
	bind := func(pod *v1.Pod) map[vcapi.TaskID]string {
		task := vcapi.NewTaskInfo(pod)
		task.NodeName = "n1"
		b.Decisions.Record(pod.UID, Decision{Node: "n1", Annotations: map[string]string{"k": "v"},
			Inventories: []InventoryStamp{{Backend: "gpushare", Gen: 1}}, Assumed: true})
		return b.Bind(client, []*vcapi.TaskInfo{task})
	}
	if errs := bind(a); len(errs) != 0 {
		t.Fatalf("bind on the inventory the allocation was made on: %v", errs)
	}
	inv["n1/gpushare"] = 2
	before := len(client.Actions())
	errs := bind(c)
	if msg := errs[vcapi.TaskID(c.UID)]; !strings.Contains(msg, "bind pod ns/c to node n1: node n1 reported a new gpushare inventory") {
		t.Fatalf("bind after the node's inventory changed: errors %v, want a refusal naming the pod, node and device", errs)
	}
	if n := len(client.Actions()) - before; n != 0 {
		t.Errorf("the refused bind made %d API requests, want none", n)
	}
	if refused != 1 {
		t.Errorf("stale-inventory refusals counted %d, want 1", refused)
	}
	task := vcapi.NewTaskInfo(r)
	task.NodeName = "n1"
	b.Decisions.Refuse(r.UID, errors.New("no room"))
	if msg := b.Bind(client, []*vcapi.TaskInfo{task})[task.UID]; msg != "bind refused: no room" {
		t.Errorf("bind of a refused task: %q, want the session's refusal", msg)
	}
}

// A refusal recorded after the decision (a namespace quota the allocation
// would pass, found once the decision is recorded) fails the bind, and the
// decision stays what the node state accounts until it settles it: the refused
// pod is on its node in Volcano's cache until the failed bind is undone.
func TestRefusalAfterTheDecisionKeepsItAssumed(t *testing.T) {
	b := New(Options{})
	pod := phasePod("q", "")
	b.Decisions.Record(pod.UID, Decision{Node: "n1", Annotations: map[string]string{"k": "v"}, Assumed: true})
	b.Decisions.Refuse(pod.UID, errors.New("namespace quota exceeded"))
	task := vcapi.NewTaskInfo(pod)
	task.NodeName = "n1"
	if _, err := b.Claim(task); err == nil || err.Error() != "bind refused: namespace quota exceeded" {
		t.Fatalf("Claim after a refusal: %v, want the refusal", err)
	}
	if d := b.Decisions.Assumed(pod.UID); d == nil || d.Annotations["k"] != "v" {
		t.Errorf("assumed decision after the refusal = %+v, want the recorded one", d)
	}
}
