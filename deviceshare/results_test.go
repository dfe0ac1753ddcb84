package deviceshare

import (
	"math"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/fitcache"
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

// The stamp of a node moves on every write to its devices and a release
// makes it volatile, whatever path writes: the node's entries in the fit
// cache stop answering.

// fakeKeyer is a ResultKeyer whose epoch the test moves.
type fakeKeyer struct{ epoch uint64 }

func (k *fakeKeyer) ResultKey(*v1.Pod, string) (string, bool) { return "k", true }
func (k *fakeKeyer) ResultEpoch() uint64                      { return k.epoch }

func TestSessionDevicesMoveTheirNodesStamp(t *testing.T) {
	backends, err := registry.Build(pluginargs.Args{VGPUEnable: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	devs, err := backends[0].NewDevices(vgpuNode("n1", vcard{"GPU-0", "", 8000}))
	if err != nil || devs == nil {
		t.Fatalf("NewDevices: %v, %v", devs, err)
	}
	c := fitcache.New(1)
	k := &fakeKeyer{epoch: 1}
	tab := c.Table("k", []device.ResultKeyer{k})
	_, ent := c.Lookup(tab, 0, tab.Epoch())
	c.Fill(ent, 0, tab.Epoch(), nil, math.NaN())
	d := &sessionDevices{base: devs, stamp: c.Stamp(0)}
	d.read()
	if hit, _ := c.Lookup(tab, 0, tab.Epoch()); hit == nil {
		t.Fatal("a read invalidated the node's entry")
	}
	pod := vgpuPod("a", "pg", 1, 1000, 10)
	if _, err := d.write().Allocate(pod, "binpack"); err != nil {
		t.Fatal(err)
	}
	if hit, ent := c.Lookup(tab, 0, tab.Epoch()); hit != nil || ent == nil {
		t.Fatalf("after a write: hit %v, entry %v; want a miss with an entry to fill", hit, ent)
	}
	c.Fill(ent, 0, tab.Epoch(), nil, math.NaN())
	if err := d.release(pod); err != nil {
		t.Fatal(err)
	}
	if hit, ent := c.Lookup(tab, 0, tab.Epoch()); hit != nil || ent != nil {
		t.Fatalf("after a release: hit %v, entry %v; want the node volatile", hit, ent)
	}
}
