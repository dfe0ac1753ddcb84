package deviceshare

import (
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// numaAgentNode is vgpuNode as this project's agent registers it (the numa
// field last), the agent that serves init containers.
func numaAgentNode(name string, cards ...vcard) *v1.Node {
	n := vgpuNode(name, cards...)
	n.Annotations[vgpuproto.AnnotationRegister] = strings.ReplaceAll(n.Annotations[vgpuproto.AnnotationRegister], ",hami-core:", ",hami-core,0:")
	return n
}

// withInitCtr adds an init container asking for n cards of mem MiB and
// cores percent (limits and requests), a native sidecar when sidecar.
func withInitCtr(p *v1.Pod, name string, sidecar bool, n, mem, cores int64) *v1.Pod {
	res := v1.ResourceList{
		"volcano.sh/vgpu-number": *resource.NewQuantity(n, resource.DecimalSI),
		"volcano.sh/vgpu-memory": *resource.NewQuantity(mem, resource.DecimalSI),
		"volcano.sh/vgpu-cores":  *resource.NewQuantity(cores, resource.DecimalSI),
	}
	c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: res, Requests: res.DeepCopy()}}
	if sidecar {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	return p
}

// warmPod is a pod whose init container (12000 MiB, 60 % of the SMs)
// prepares a model, with a sidecar (2000 MiB, 20 %) declared after it and
// an app container (4000 MiB, 30 %): on one card it holds 12000 MiB and
// 60 % (the init container's phase) and 2 holders (the sidecar's and the
// app container's).
func warmPod(name, group string) *v1.Pod {
	p := vgpuPod(name, group, 1, 4000, 30)
	withInitCtr(p, "warm", false, 1, 12000, 60)
	return withInitCtr(p, "proxy", true, 1, 2000, 20)
}

// TestVGPUInitContainersAndSidecarsSession: real Volcano actions place a
// pod with a vGPU init container and a vGPU sidecar on one card, write the
// init containers' entries first, and the card is charged the pod's peak
// (12000 MiB), before and after the informer shows the bound pod: another
// pod of 4384 MiB fits beside it, one of 4385 MiB does not.
func TestVGPUInitContainersAndSidecarsSession(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{numaAgentNode("n1", vcard{"GPU-0", "", 16384})}, nil)
	warm := warmPod("warm", "pg1")
	c.addJob(podGroup("pg1", 1), warm)
	c.session(nil)
	b := c.waitBinds(1)[testNamespace+"/warm"]
	want := "GPU-0,NVIDIA,12000,60:;GPU-0,NVIDIA,2000,20:;GPU-0,NVIDIA,4000,30:"
	if got := b.Annotations[vgpuproto.AnnotationIDs]; got != want || b.Annotations[vgpuproto.AnnotationToAllocate] != want {
		t.Errorf("vgpu-ids-new %q, devices-to-allocate %q; want both %q", got, b.Annotations[vgpuproto.AnnotationToAllocate], want)
	}
	check := func(when string) {
		t.Helper()
		c.addJob(podGroup("big-"+when, 1), vgpuPod("big-"+when, "big-"+when, 1, 4385, 0))
		c.session(nil)
		c.expectNoBind()
		c.addJob(podGroup("fits-"+when, 1), vgpuPod("fits-"+when, "fits-"+when, 1, 4384, 0))
		c.session(nil)
		if _, ok := c.waitBinds(1)[testNamespace+"/fits-"+when]; !ok {
			t.Fatalf("%s: the pod of 4384 MiB was not bound beside warm", when)
		}
	}
	check("assumed")
	c.confirmBinds(warm)
	c.session(nil)
	c.expectNoBind()
	if got := c.st.nodes.Stats().Assumed; got != 1 {
		t.Errorf("assumed allocations after confirming warm = %d, want 1 (fits-assumed)", got)
	}
	// The confirmed record is charged what the assumption was: the pod
	// of 4384 MiB took the rest, nothing more fits.
	c.addJob(podGroup("more", 1), vgpuPod("more", "more", 1, 1, 0))
	c.session(nil)
	c.expectNoBind()
}

// TestVGPUDiscardedInitGangReturnsCards: a gang whose pods each hold 12000
// MiB of the one card at their init containers' peak cannot place its
// second member; discarding it gives back exactly what the first took, so
// nothing stays assumed and a pod asking for the whole card binds next.
func TestVGPUDiscardedInitGangReturnsCards(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{numaAgentNode("n1", vcard{"GPU-0", "", 16384})}, nil)
	var pods []*v1.Pod
	for _, n := range []string{"b0", "b1"} {
		pods = append(pods, withInitCtr(vgpuPod(n, "big", 1, 1000, 10), "warm", false, 1, 12000, 10))
	}
	c.addJob(podGroup("big", 2), pods...)
	var msg string
	c.session(func(ssn *framework.Session) { msg = fitMessage(ssn, pods[0]) + fitMessage(ssn, pods[1]) })
	c.expectNoBind()
	if !strings.Contains(msg, vgpu.ReasonInsufficientMem) {
		t.Errorf("fit errors %q do not say the second member's init container does not fit", msg)
	}
	if got := c.st.nodes.Stats().Assumed; got != 0 {
		t.Errorf("assumed allocations after the discarded gang = %d, want 0", got)
	}
	c.addJob(podGroup("whole", 1), vgpuPod("whole", "whole", 1, 16384, 100))
	c.session(nil)
	var got []string
	for k := range c.waitBinds(1) {
		got = append(got, k)
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{testNamespace + "/whole"}, got); diff != "" {
		t.Errorf("bound pods (-want +got):\n%s", diff)
	}
	c.expectNoBind()
}

// TestVGPUInitRequestsRefused: the reasons users see for init container
// requests no node serves.
func TestVGPUInitRequestsRefused(t *testing.T) {
	upstream := vgpuNode("up", vcard{"GPU-u", "", 16384}) // volcano-vgpu-device-plugin's registration
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{numaAgentNode("n1", vcard{"GPU-0", "", 16384}), upstream}, nil)
	fewer := withInitCtr(vgpuPod("fewer", "pg1", 1, 1000, 10), "warm", false, 2, 1000, 10)
	peak := withInitCtr(vgpuPod("peak", "pg2", 1, 1000, 10), "warm", false, 1, 20000, 10)
	c.addJob(podGroup("pg1", 1), fewer)
	c.addJob(podGroup("pg2", 1), peak)
	var msgs []string
	c.session(func(ssn *framework.Session) {
		for _, p := range []*v1.Pod{fewer, peak} {
			msgs = append(msgs, fitMessage(ssn, p))
		}
	})
	c.expectNoBind()
	for i, want := range [][]string{
		{`container "main": volcano.sh/vgpu-number=1`, `init container "warm"`, "want 0 or at least 2"},
		{vgpu.ReasonCardTooSmall, vgpu.ReasonInitAgent},
	} {
		for _, w := range want {
			if !strings.Contains(msgs[i], w) {
				t.Errorf("fit error %q does not contain %q", msgs[i], w)
			}
		}
	}
}
