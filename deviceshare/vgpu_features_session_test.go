package deviceshare

import (
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/deviceshare/bind"
	"github.com/vgpushare/vshare/deviceshare/nodestate"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// vgpuExclusiveArgs keep pods labelled exclusive-test=yes off each
// other's cards (deviceshare.GPUExclusiveRules).
const vgpuExclusiveArgs = vgpuArgs + `
      deviceshare.GPUExclusiveRules:
      - {exclusive-test: "yes"}`

// withLabels sets label key/value pairs on the pod and returns it.
func withLabels(p *v1.Pod, kv ...string) *v1.Pod {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		p.Labels[kv[i]] = kv[i+1]
	}
	return p
}

// runningWith returns a copy of the pod running on the node with the
// allocation annotation vgpu-ids-new=ids, as the informer shows a pod a
// previous scheduler process placed.
func runningWith(p *v1.Pod, node, ids string) *v1.Pod {
	out := p.DeepCopy()
	out.Spec.NodeName = node
	out.Status.Phase = v1.PodRunning
	out.Annotations[vgpuproto.AnnotationIDs] = ids
	out.Annotations[vgpuproto.AnnotationToAllocate] = ids
	return out
}

func TestVGPUExclusiveRulesSession(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuExclusiveArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
	// Binpack would put both on one card; the rule keeps them apart, in
	// one session.
	a1 := withLabels(vgpuPod("a1", "pg1", 1, 2000, 10), "exclusive-test", "yes")
	a2 := withLabels(vgpuPod("a2", "pg1", 1, 2000, 10), "exclusive-test", "yes")
	c.addJob(podGroup("pg1", 2), a1, a2)
	c.session(nil)
	if diff := cmp.Diff(map[string]int{"n1/GPU-0": 1, "n1/GPU-1": 1}, perCard(c.waitBinds(2))); diff != "" {
		t.Fatalf("rule-matching pods per card (-want +got):\n%s", diff)
	}
	// A pod matching no rule shares a card with them (binds in flight).
	other := withLabels(vgpuPod("other", "pg2", 1, 2000, 10), "exclusive-test", "no")
	c.addJob(podGroup("pg2", 1), other)
	c.session(nil)
	if got := vgpuCards(c.waitBinds(1))["other"]; got != "n1/GPU-0" && got != "n1/GPU-1" {
		t.Errorf("the non-matching pod got %q", got)
	}
	// A third matching pod waits, naming the rule, while the binds are in
	// flight and after they are confirmed.
	a3 := withLabels(vgpuPod("a3", "pg3", 1, 2000, 10), "exclusive-test", "yes")
	c.addJob(podGroup("pg3", 1), a3)
	msg := sessionFitMessages(c, a3)
	c.expectNoBind()
	if !strings.Contains(msg, vgpu.ReasonExclusiveRule) {
		t.Errorf("fit error %q does not name the exclusive rule", msg)
	}
	c.confirmBinds(a1, a2, other)
	msg = sessionFitMessages(c, a3)
	c.expectNoBind()
	if !strings.Contains(msg, vgpu.ReasonExclusiveRule) {
		t.Errorf("after the binds, fit error %q does not name the exclusive rule", msg)
	}
}

// TestVGPUExclusiveRulesAfterRestart: a new scheduler process learns which
// cards hold rule-matching pods from the pods' labels and allocation
// annotations, so it neither loses nor doubles a reservation.
func TestVGPUExclusiveRulesAfterRestart(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuExclusiveArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
	c.addJob(podGroup("old", 1), runningWith(withLabels(vgpuPod("old", "old", 1, 2000, 10), "exclusive-test", "yes"), "n1", "GPU-1,NVIDIA,2000,10:"))
	// Binpack prefers the used card GPU-1; the rule sends it to GPU-0.
	fresh := withLabels(vgpuPod("fresh", "pg1", 1, 2000, 10), "exclusive-test", "yes")
	c.addJob(podGroup("pg1", 1), fresh)
	c.session(nil)
	if got := vgpuCards(c.waitBinds(1))["fresh"]; got != "n1/GPU-0" {
		t.Errorf("the rule-matching pod got %q, want n1/GPU-0 (GPU-1 holds one from before the restart)", got)
	}
}

func TestVGPUCardCordonSession(t *testing.T) {
	node := vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})
	node.Annotations[vgpuproto.AnnotationCordon] = "GPU-0"
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{node}, nil)
	// The pod on the cordoned card keeps it and stays accounted.
	c.addJob(podGroup("old", 1), runningWith(vgpuPod("old", "old", 1, 15000, 10), "n1", "GPU-0,NVIDIA,15000,10:"))
	// Binpack would prefer the used GPU-0 for a small pod; the cordon
	// sends it to GPU-1.
	small := vgpuPod("small", "pg1", 1, 1000, 10)
	c.addJob(podGroup("pg1", 1), small)
	c.session(nil)
	if got := vgpuCards(c.waitBinds(1))["small"]; got != "n1/GPU-1" {
		t.Fatalf("small pod got %q, want n1/GPU-1 (GPU-0 is cordoned)", got)
	}
	// A pod that only the cordoned card could take waits, naming the cordon.
	big := vgpuPod("big", "pg2", 1, 15500, 10)
	c.addJob(podGroup("pg2", 1), big)
	msg := sessionFitMessages(c, big)
	c.expectNoBind()
	if !strings.Contains(msg, vgpu.ReasonCordoned) || !strings.Contains(msg, vgpuproto.AnnotationCordon) {
		t.Errorf("fit error %q does not name the cordon", msg)
	}
}

// TestVGPUExclusiveRulesFollowLabels: a running pod whose rule label is
// taken off no longer keeps rule-matching pods off its card, as upstream,
// which matches labels every session.
func TestVGPUExclusiveRulesFollowLabels(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuExclusiveArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000})}, nil)
	old := runningWith(withLabels(vgpuPod("old", "old", 1, 2000, 10), "exclusive-test", "yes"), "n1", "GPU-0,NVIDIA,2000,10:")
	c.addJob(podGroup("old", 1), old)
	fresh := withLabels(vgpuPod("fresh", "pg1", 1, 2000, 10), "exclusive-test", "yes")
	c.addJob(podGroup("pg1", 1), fresh)
	if msg := sessionFitMessages(c, fresh); !strings.Contains(msg, vgpu.ReasonExclusiveRule) {
		t.Fatalf("fit error %q does not name the exclusive rule", msg)
	}
	c.expectNoBind()
	relabelled := old.DeepCopy()
	relabelled.Labels["exclusive-test"] = "no"
	relabelled.ResourceVersion = "3"
	c.cache.UpdatePod(old, relabelled)
	c.session(nil)
	if got := vgpuCards(c.waitBinds(1))["fresh"]; got != "n1/GPU-0" {
		t.Errorf("after the label change the pod got %q, want n1/GPU-0", got)
	}
}

// TestLedgerReportsCordonWarnings: a cordon naming no card is a usable
// problem of the Sync that decodes it (one node event), and not again
// until the annotation changes.
func TestLedgerReportsCordonWarnings(t *testing.T) {
	backends, err := registry.Build(pluginargs.Args{VGPUEnable: true}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	l := nodestate.New(testingclock.NewFakeClock(testTime), bind.NewDecisions(nil))
	node := vgpuNode("n1", vcard{"GPU-0", "", 16000})
	node.Annotations[vgpuproto.AnnotationCordon] = "GPU-0,GPU-x"
	res := l.Sync(nodeInfo(t, node), backends)
	if len(res.Problems) != 1 || !res.Problems[0].Usable || !strings.Contains(res.Problems[0].Err.Error(), `"GPU-x"`) {
		t.Fatalf("problems %+v, want one usable problem naming GPU-x", res.Problems)
	}
	if res = l.Sync(nodeInfo(t, node), backends); len(res.Problems) != 0 {
		t.Errorf("second Sync reported %+v again", res.Problems)
	}
	view, _, _ := l.View()
	if v := view["n1"][vgpu.Name]; v.Devices == nil || v.InvErr != nil {
		t.Errorf("the node's cards are unavailable after a bad cordon: %+v", v)
	}
}

// Under the fragment policy a pod without devices is placed by the cards
// its CPU and memory would strand (docs/quality.md, "One code path"):
// first on a node without cards, else where the cards keep the CPU their
// learned workload needs.
func TestVGPUFragmentPlacesPodsWithoutDevices(t *testing.T) {
	teach := func(c *cluster) {
		// 16 pending requests for a quarter card and 1 CPU publish a
		// learned mix. Their gang needs 17 members, so Volcano never
		// tries to place them; the plugin still sees them pending.
		var waiting []*v1.Pod
		for i := range 16 {
			waiting = append(waiting, vgpuPod("w"+strconv.Itoa(i), "teach", 1, 4000, 25))
		}
		c.addJob(podGroup("teach", 17), waiting...)
	}
	// No nodeorder plugin: its least-requested score would prefer the
	// roomier node for reasons of its own.
	fragConf := aloneConf("fragment", false)
	// Volcano breaks ties at random: each case places several pods one
	// session at a time, so a tie would show as a split.
	t.Run("bare node first", func(t *testing.T) {
		c := newCluster(t, fragConf, []*v1.Node{
			vgpuNode("gpu", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000}),
			gpuNode("bare", 0, 0)}, nil)
		teach(c)
		for i := range 4 {
			p := devicePod("cpu"+strconv.Itoa(i), "pg"+strconv.Itoa(i), nil)
			c.addJob(podGroup("pg"+strconv.Itoa(i), 1), p)
			c.session(nil)
			if got := c.waitBinds(1)[p.Namespace+"/"+p.Name].Node; got != "bare" {
				t.Fatalf("pod %d without devices went to %s, want the node without cards", i, got)
			}
			c.confirmBinds(p)
		}
	})
	t.Run("keeps the CPU cards need", func(t *testing.T) {
		tight := vgpuNode("tight", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})
		tight.Status.Allocatable[v1.ResourceCPU] = resource.MustParse("4")
		c := newCluster(t, fragConf, []*v1.Node{tight,
			vgpuNode("roomy", vcard{"GPU-2", "", 16000}, vcard{"GPU-3", "", 16000})}, nil)
		teach(c)
		for i := range 4 {
			// 3.5 CPUs on "tight" would leave its cards without the one
			// CPU every learned request needs.
			p := devicePod("cpu"+strconv.Itoa(i), "pg"+strconv.Itoa(i), nil)
			p.Spec.Containers[0].Resources.Requests[v1.ResourceCPU] = resource.MustParse("3500m")
			c.addJob(podGroup("pg"+strconv.Itoa(i), 1), p)
			c.session(nil)
			if got := c.waitBinds(1)[p.Namespace+"/"+p.Name].Node; got != "roomy" {
				t.Fatalf("pod %d without devices went to %s, want the node where it strands no card", i, got)
			}
			c.confirmBinds(p)
		}
	})
}
