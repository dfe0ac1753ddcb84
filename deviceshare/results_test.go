package deviceshare

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
)

// A pod of the same request key as one placed earlier in the session must
// not be answered from what the node was before that placement: the
// second pod does not fit the card the first one took, and must fail the
// predicate with the card's reason (a stale "fits" would let Volcano
// allocate it and the allocation fail instead, with no fit error).
func TestResultTableSeesTheSessionsOwnAllocations(t *testing.T) {
	for _, policy := range []string{"binpack", "spread", "fragment"} {
		t.Run(policy, func(t *testing.T) {
			c := newCluster(t, schedulerConf(`      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: `+policy+`
      deviceshare.ScheduleWeight: 10`), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 8000})}, nil)
			a, b := vgpuPod("a", "pga", 1, 6000, 10), vgpuPod("b", "pgb", 1, 6000, 10)
			c.addJob(podGroup("pga", 1), a)
			c.addJob(podGroup("pgb", 1), b)
			var msgA, msgB string
			c.session(func(ssn *framework.Session) {
				msgA, msgB = fitMessage(ssn, a), fitMessage(ssn, b)
			})
			binds := c.waitBinds(1)
			c.expectNoBind()
			loser := msgB
			if _, ok := binds[testNamespace+"/b"]; ok {
				loser = msgA
			}
			if !strings.Contains(loser, "insufficient vGPU memory") {
				t.Errorf("bound %v; the pod left out has fit error %q, want the card's memory reason", vgpuCards(binds), loser)
			}
		})
	}
}

// fakeKeyer is a ResultKeyer whose epoch the test moves.
type fakeKeyer struct{ epoch uint64 }

func (k *fakeKeyer) ResultKey(*v1.Pod, string) (string, bool) { return "k", true }
func (k *fakeKeyer) ResultEpoch() uint64                      { return k.epoch }

func TestResultTableEntryValidity(t *testing.T) {
	s := &sessionState{stamps: make([]nodeStamp, 2), nodes: map[string]*sessionNode{"n0": {idx: 0}, "n1": {idx: 1}}}
	k := &fakeKeyer{epoch: 7}
	tab := &resultTable{keyers: []device.ResultKeyer{k}, ents: make([]resultEntry, 2)}
	hit, ent := s.lookup(tab, 0, tab.epoch())
	if hit != nil || ent == nil {
		t.Fatalf("empty table: hit %v, entry %v; want a miss with an entry to fill", hit, ent)
	}
	fail := &keptFailure{statuses: []*vcapi.Status{status(device.Unschedulable, "full")}, counted: [][2]string{{"hamivgpu", "full"}}}
	s.fill(ent, 0, tab.epoch(), fail)
	if hit, _ := s.lookup(tab, 0, tab.epoch()); hit == nil || hit.fail != fail {
		t.Fatalf("after fill: hit %v, want the failure kept", hit)
	}
	if hit, _ := s.lookup(tab, 1, tab.epoch()); hit != nil {
		t.Errorf("node 1 answered from node 0's entry")
	}
	// An equal failure computed for another node is the same object.
	ent1 := &tab.ents[1]
	s.fill(ent1, 1, tab.epoch(), &keptFailure{statuses: []*vcapi.Status{status(device.Unschedulable, "full")}, counted: [][2]string{{"hamivgpu", "full"}}})
	if ent1.fail != fail {
		t.Errorf("equal failures were not interned")
	}
	s.touch("n0")
	if hit, _ := s.lookup(tab, 0, tab.epoch()); hit != nil {
		t.Errorf("entry still valid after the node changed")
	}
	if hit, _ := s.lookup(tab, 1, tab.epoch()); hit == nil {
		t.Errorf("node 1's entry lost when node 0 changed")
	}
	k.epoch++
	if hit, _ := s.lookup(tab, 1, tab.epoch()); hit != nil {
		t.Errorf("entry still valid after the backend's epoch moved")
	}
	s.fill(ent1, 1, tab.epoch(), nil)
	s.stamps[1].volatile = true
	if hit, ent := s.lookup(tab, 1, tab.epoch()); hit != nil || ent != nil {
		t.Errorf("volatile node: hit %v, entry %v; want neither", hit, ent)
	}
}

// The stamp of a node moves on every write to its devices and a release
// makes it volatile, whatever path writes.
func TestSessionDevicesMoveTheirNodesStamp(t *testing.T) {
	backends, err := registry.Build(pluginargs.Args{VGPUEnable: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := backends[0].NewDevices(vgpuNode("n1", vcard{"GPU-0", "", 8000}))
	if err != nil || devs == nil {
		t.Fatalf("NewDevices: %v, %v", devs, err)
	}
	var stamp nodeStamp
	d := &sessionDevices{base: devs, stamp: &stamp}
	d.read()
	if stamp.ver != 0 {
		t.Fatalf("read moved the stamp to %d", stamp.ver)
	}
	pod := vgpuPod("a", "pg", 1, 1000, 10)
	if _, err := d.write().Allocate(pod, "binpack"); err != nil {
		t.Fatal(err)
	}
	if stamp.ver != 1 || stamp.volatile {
		t.Fatalf("after a write: %+v, want ver 1, not volatile", stamp)
	}
}
