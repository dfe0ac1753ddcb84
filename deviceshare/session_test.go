package deviceshare

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"volcano.sh/volcano/pkg/scheduler/framework"
)

const shareArgs = `      deviceshare.GPUSharingEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10`

// cardUse counts, per node and gpu-index, the bound pods.
func cardUse(binds map[string]boundPod) map[string]int {
	out := map[string]int{}
	for _, b := range binds {
		out[b.Node+"/"+b.Annotations["volcano.sh/gpu-index"]]++
	}
	return out
}

func TestGangSharesCards(t *testing.T) {
	c := newCluster(t, schedulerConf(shareArgs), []*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	var pods []*v1.Pod
	for _, n := range []string{"w0", "w1", "w2", "w3"} {
		pods = append(pods, gpuMemPod(n, "pg1", 4000))
	}
	c.addJob(podGroup("pg1", 4), pods...)

	c.session(nil)
	binds := c.waitBinds(4)

	want := map[string]int{"n1/0": 2, "n1/1": 2}
	if diff := cmp.Diff(want, cardUse(binds)); diff != "" {
		t.Errorf("pods per card (-want +got):\n%s", diff)
	}
	for key, b := range binds {
		if b.Annotations["volcano.sh/predicate-time"] == "" {
			t.Errorf("%s: binding lacks volcano.sh/predicate-time: %v", key, b.Annotations)
		}
	}
}

func TestGangThatDoesNotFitStaysPendingWithCardReason(t *testing.T) {
	c := newCluster(t, schedulerConf(shareArgs), []*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	// 15000 MiB fit the node's 16000 in total (Volcano's own accounting
	// agrees), but no card holds two 5000 MiB pods.
	pods := []*v1.Pod{gpuMemPod("w0", "pg1", 5000), gpuMemPod("w1", "pg1", 5000), gpuMemPod("w2", "pg1", 5000)}
	c.addJob(podGroup("pg1", 3), pods...)

	var msgs []string
	c.session(func(ssn *framework.Session) {
		for _, p := range pods {
			if m := fitMessage(ssn, p); m != "" {
				msgs = append(msgs, m)
			}
		}
	})
	c.expectNoBind()
	if len(msgs) == 0 {
		t.Fatalf("no fit error recorded for the gang")
	}
	if !strings.Contains(strings.Join(msgs, " "), "memory") {
		t.Errorf("fit errors do not name the card-level cause (memory): %q", msgs)
	}
	t.Logf("fit error users see: %s", msgs[0])
}

func TestTwoSessionsWithoutInformerUpdatesDoNotDoubleAllocate(t *testing.T) {
	c := newCluster(t, schedulerConf(shareArgs), []*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	c.addJob(podGroup("pg1", 1), gpuMemPod("a", "pg1", 6000))
	c.addJob(podGroup("pg2", 1), gpuMemPod("b", "pg2", 6000))
	c.session(nil)
	first := c.waitBinds(2)
	if diff := cmp.Diff(map[string]int{"n1/0": 1, "n1/1": 1}, cardUse(first)); diff != "" {
		t.Fatalf("first session placement (-want +got):\n%s", diff)
	}

	// The binds are in flight: the cache shows both pods on n1 without
	// their annotations. 2000 MiB are left per card; 6000 must not fit.
	c.addJob(podGroup("pg3", 1), gpuMemPod("c", "pg3", 6000))
	c.session(nil)
	c.expectNoBind()
	if got := c.st.nodes.Stats().Assumed; got != 2 {
		t.Errorf("assumed allocations = %d, want 2", got)
	}

	// 2000 MiB still fits next to each of them.
	c.addJob(podGroup("pg4", 1), gpuMemPod("d", "pg4", 2000))
	c.session(nil)
	binds := c.waitBinds(1)
	if _, ok := binds[testNamespace+"/d"]; !ok {
		t.Fatalf("pod d was not bound: %v", binds)
	}
}

func TestConfirmedBindsAreAccountedOnce(t *testing.T) {
	c := newCluster(t, schedulerConf(shareArgs), []*v1.Node{gpuNode("n1", 1, 8000)}, nil)
	a := gpuMemPod("a", "pg1", 3000)
	c.addJob(podGroup("pg1", 1), a)
	c.session(nil)
	c.waitBinds(1)
	c.confirmBinds(a)

	// After the informer shows the annotations, the assumption is
	// replaced by the pod's own record: 5000 MiB left, not 2000 and not 8000.
	c.addJob(podGroup("pg2", 1), gpuMemPod("too-big", "pg2", 5001))
	c.session(nil)
	c.expectNoBind()
	if got := c.st.nodes.Stats().Assumed; got != 0 {
		t.Errorf("assumed allocations after confirmation = %d, want 0", got)
	}
	c.addJob(podGroup("pg3", 1), gpuMemPod("fits", "pg3", 5000))
	c.session(nil)
	binds := c.waitBinds(1)
	if b := binds[testNamespace+"/fits"]; b.Annotations["volcano.sh/gpu-index"] != "0" {
		t.Errorf("pod fits bound with %v, want gpu-index 0", b)
	}
}

func TestDiscardedGangReturnsCapacity(t *testing.T) {
	c := newCluster(t, schedulerConf(shareArgs), []*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	// The high-priority gang takes both cards in-session, then cannot place
	// its third member and is discarded.
	big := podGroup("big", 3)
	big.Spec.PriorityClassName = "high"
	high := int32(1000)
	var bigPods []*v1.Pod
	for _, n := range []string{"b0", "b1", "b2"} {
		p := gpuMemPod(n, "big", 5000)
		p.Spec.Priority = &high
		bigPods = append(bigPods, p)
	}
	c.addJob(big, bigPods...)
	// The small job needs both cards whole; it only fits if the discard gave
	// everything back.
	c.addJob(podGroup("small", 2), gpuMemPod("s0", "small", 8000), gpuMemPod("s1", "small", 8000))

	c.session(nil)
	binds := c.waitBinds(2)
	var got []string
	for k := range binds {
		got = append(got, k)
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{testNamespace + "/s0", testNamespace + "/s1"}, got); diff != "" {
		t.Errorf("bound pods (-want +got):\n%s", diff)
	}
	c.expectNoBind()
}

func TestGPUNumberBindsWholeCards(t *testing.T) {
	args := `      deviceshare.GPUNumberEnable: "true"`
	c := newCluster(t, schedulerConf(args), []*v1.Node{gpuNode("n1", 4, 16000)}, nil)
	c.addJob(podGroup("pg1", 1), gpuNumPod("two", "pg1", 2))
	c.addJob(podGroup("pg2", 1), gpuNumPod("one", "pg2", 1))
	c.session(nil)
	binds := c.waitBinds(2)
	seen := map[string]bool{}
	for key, b := range binds {
		for _, idx := range strings.Split(b.Annotations["volcano.sh/gpu-index"], ",") {
			if seen[idx] {
				t.Errorf("%s: card %s handed out twice (%v)", key, idx, binds)
			}
			seen[idx] = true
		}
	}
	if len(seen) != 3 {
		t.Errorf("cards handed out = %v, want 3 distinct", seen)
	}
	// One card is left: a 2-card pod must wait.
	c.addJob(podGroup("pg3", 1), gpuNumPod("wait", "pg3", 2))
	c.session(nil)
	c.expectNoBind()
}

func TestInvalidArgumentsKeepDevicePodsPendingWithReason(t *testing.T) {
	args := `      deviceshare.GPUSharingEnable: true
      deviceshare.GPUNumberEnable: true`
	c := newCluster(t, schedulerConf(args), []*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	p := gpuMemPod("a", "pg1", 1000)
	c.addJob(podGroup("pg1", 1), p)
	plain := devicePod("plain", "pg2", nil)
	c.addJob(podGroup("pg2", 1), plain)
	var msg string
	c.session(func(ssn *framework.Session) { msg = fitMessage(ssn, p) })
	binds := c.waitBinds(1)
	if _, ok := binds[testNamespace+"/plain"]; !ok {
		t.Errorf("a pod without device requests must still schedule: %v", binds)
	}
	c.expectNoBind()
	for _, want := range []string{"deviceshare plugin arguments are invalid", pluginargs.ArgGPUNumberEnable} {
		if !strings.Contains(msg, want) {
			t.Errorf("fit error %q does not contain %q", msg, want)
		}
	}
}

func TestNodeLockAllowsOneAllocationInFlightPerNode(t *testing.T) {
	args := shareArgs + `
      deviceshare.NodeLockEnable: true`
	c := newCluster(t, schedulerConf(args), []*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	c.addJob(podGroup("pg1", 1), gpuMemPod("a", "pg1", 1000))
	c.addJob(podGroup("pg2", 1), gpuMemPod("b", "pg2", 1000))
	var msg string
	c.session(func(ssn *framework.Session) {
		for _, job := range ssn.Jobs {
			for _, fe := range job.NodesFitErrors {
				msg = fe.Error()
			}
		}
	})
	binds := c.waitBinds(1)
	c.expectNoBind()
	if len(binds) != 1 {
		t.Fatalf("binds = %v, want exactly one while the node is locked", binds)
	}
	if !strings.Contains(msg, ReasonNodeLocked) {
		t.Errorf("the second pod's fit error %q does not say the node is locked", msg)
	}
	// Still in flight in the next session: the node stays locked.
	c.session(nil)
	c.expectNoBind()
}

func TestInvalidRegistrationMakesNodeUnavailableWithEvent(t *testing.T) {
	bad := gpuNode("bad", 2, 8000)
	bad.Annotations["volcano.sh/gpu-unhealthy-ids"] = "one"
	c := newCluster(t, schedulerConf(shareArgs), []*v1.Node{bad, gpuNode("good", 1, 8000)}, nil)
	p := gpuMemPod("a", "pg1", 1000)
	c.addJob(podGroup("pg1", 1), p)
	c.addJob(podGroup("pg2", 1), gpuMemPod("b", "pg2", 8000))
	var msg string
	c.session(func(ssn *framework.Session) {
		for _, job := range ssn.Jobs {
			for _, fe := range job.NodesFitErrors {
				msg = fe.Error()
			}
		}
	})
	binds := c.waitBinds(1)
	for key, b := range binds {
		if b.Node != "good" {
			t.Errorf("%s bound to %s; the node with an invalid registration must not be used", key, b.Node)
		}
	}
	if !strings.Contains(msg, "gpushare"+ReasonBadInventorySuffix) {
		t.Errorf("fit error %q does not name the invalid registration", msg)
	}
	c.waitForEvent(EventInvalidRegistration, "volcano.sh/gpu-unhealthy-ids")
}

// waitForEvent polls the events the plugin recorded through the session's
// client until one has the reason and mentions want.
func (c *cluster) waitForEvent(reason, want string) {
	c.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		events, err := c.cache.Client().CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			c.t.Fatal(err)
		}
		for _, e := range events.Items {
			if e.Reason == reason && strings.Contains(e.Message, want) {
				return
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	c.t.Fatalf("no %s event mentioning %q was recorded", reason, want)
}

func TestDeviceRequestNoEnabledTypeServesStaysPending(t *testing.T) {
	c := newCluster(t, schedulerConf(shareArgs), []*v1.Node{gpuNode("n1", 2, 8000)}, nil)
	// The node advertises the chip resource, so Volcano's own fit alone
	// would place the pod, without any card recorded for it.
	n := gpuNode("n1", 2, 8000)
	n.Status.Allocatable["huawei.com/Ascend910B"] = resource.MustParse("8")
	n.Status.Capacity["huawei.com/Ascend910B"] = resource.MustParse("8")
	if err := c.cache.AddOrUpdateNode(n); err != nil {
		t.Fatal(err)
	}
	npu := devicePod("npu", "pg1", v1.ResourceList{"huawei.com/Ascend910B": resource.MustParse("1")})
	c.addJob(podGroup("pg1", 1), npu)
	var msg string
	c.session(func(ssn *framework.Session) { msg = fitMessage(ssn, npu) })
	c.expectNoBind()
	if want := ReasonUnservedPrefix + "huawei.com/Ascend910B"; !strings.Contains(msg, want) {
		t.Errorf("fit error %q does not contain %q", msg, want)
	}
}
