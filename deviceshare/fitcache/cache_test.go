package fitcache

import (
	"math"
	"testing"

	v1 "k8s.io/api/core/v1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
)

// fakeKeyer is a ResultKeyer whose epoch the test moves.
type fakeKeyer struct{ epoch uint64 }

func (k *fakeKeyer) ResultKey(*v1.Pod, string) (string, bool) { return "k", true }
func (k *fakeKeyer) ResultEpoch() uint64                      { return k.epoch }

func TestResultTableEntryValidity(t *testing.T) {
	c := New(2)
	k := &fakeKeyer{epoch: 7}
	tab := c.Table("k", []device.ResultKeyer{k})
	hit, ent := c.Lookup(tab, 0, tab.Epoch())
	if hit != nil || ent == nil {
		t.Fatalf("empty table: hit %v, entry %v; want a miss with an entry to fill", hit, ent)
	}
	fail := &Failure{Statuses: []*vcapi.Status{c.Status("deviceshare", device.Unschedulable, "full")}, Counted: [][2]string{{"hamivgpu", "full"}}}
	c.Fill(ent, 0, tab.Epoch(), fail, math.NaN())
	if hit, _ := c.Lookup(tab, 0, tab.Epoch()); hit == nil || hit.Fail != fail {
		t.Fatalf("after fill: hit %v, want the failure kept", hit)
	}
	if hit, _ := c.Lookup(tab, 1, tab.Epoch()); hit != nil {
		t.Errorf("node 1 answered from node 0's entry")
	}
	// An equal failure computed for another node is the same object.
	ent1 := &tab.ents[1]
	c.Fill(ent1, 1, tab.Epoch(), &Failure{Statuses: []*vcapi.Status{c.Status("deviceshare", device.Unschedulable, "full")}, Counted: [][2]string{{"hamivgpu", "full"}}}, math.NaN())
	if ent1.Fail != fail {
		t.Errorf("equal failures were not interned")
	}
	c.Stamp(0).Touch()
	if hit, _ := c.Lookup(tab, 0, tab.Epoch()); hit != nil {
		t.Errorf("entry still valid after the node changed")
	}
	if hit, _ := c.Lookup(tab, 1, tab.Epoch()); hit == nil {
		t.Errorf("node 1's entry lost when node 0 changed")
	}
	k.epoch++
	if hit, _ := c.Lookup(tab, 1, tab.Epoch()); hit != nil {
		t.Errorf("entry still valid after the backend's epoch moved")
	}
	c.Fill(ent1, 1, tab.Epoch(), nil, 42)
	if hit, _ := c.Lookup(tab, 1, tab.Epoch()); hit == nil || hit.Fail != nil || hit.Score != 42 {
		t.Errorf("fitting node filled with its score: hit %+v, want no failure and score 42", hit)
	}
	c.Stamp(1).SetVolatile()
	if hit, ent := c.Lookup(tab, 1, tab.Epoch()); hit != nil || ent != nil {
		t.Errorf("volatile node: hit %v, entry %v; want neither", hit, ent)
	}
}

// One status per code and reason within a session: the same object.
func TestStatusesAreShared(t *testing.T) {
	c := New(1)
	a, b := c.Status("deviceshare", device.Unschedulable, "full"), c.Status("deviceshare", device.Unschedulable, "full")
	if a != b || a.Reason != "full" || a.Plugin != "deviceshare" {
		t.Errorf("statuses %p %+v and %p, want one shared status", a, a, b)
	}
	if c.Status("deviceshare", device.UnschedulableAndUnresolvable, "full") == a {
		t.Error("statuses of different codes were shared")
	}
}
