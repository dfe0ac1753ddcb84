package deviceshare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vgpushare/vshare/deviceshare/queuecap"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/util"
)

// pendingGroup is a PodGroup the enqueue action still has to admit, with
// the minimum resources the job controller would set.
func pendingGroup(name, queue string, minMember int32) *schedulingv1beta1.PodGroup {
	pg := util.BuildPodGroup(name, testNamespace, queue, minMember, nil, schedulingv1beta1.PodGroupPending)
	pg.Spec.MinResources = &v1.ResourceList{v1.ResourceCPU: resource.MustParse("1"), v1.ResourceMemory: resource.MustParse("1Gi")}
	return pg
}

// TestQueueCapabilityOnVGPUMemory: queue q1 may hold 20000 MiB of vGPU
// memory. Volcano v1.10 drops volcano.sh/vgpu-memory from every request and
// capability (it is in IgnoredDevicesList), so without the plugin nothing
// would stop q1. A running pod holds 2 cards x 8000 MiB (16000, where its
// spec says 8000). Of two enqueued jobs, the one asking 4000 fits and the
// one asking 6000 is not allocated; a pending job asking 6000 is not
// enqueued; both with a reason naming the queue and the resource. The
// queue's status reports 16000.
func TestQueueCapabilityOnVGPUMemory(t *testing.T) {
	for _, plugin := range []string{"proportion", "capacity"} {
		t.Run(plugin, func(t *testing.T) { testQueueCapabilityOnVGPUMemory(t, plugin) })
	}
}

func testQueueCapabilityOnVGPUMemory(t *testing.T, queuePlugin string) {
	queues := []*schedulingv1beta1.Queue{
		util.BuildQueue("q1", 1, v1.ResourceList{"volcano.sh/vgpu-memory": resource.MustParse("20000")}),
	}
	pc := newPreemptCluster(t, tieredConf("enqueue, allocate", vgpuArgs, queuePlugin),
		[]*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000}, vcard{"GPU-2", "", 16000})}, queues)
	pc.place("low", "q1", vgpuPod("two-cards", "pg-two-cards", 2, 8000, 10))

	big := vgpuPod("big", "pg-big", 1, 6000, 10)
	pc.addJob(pendingGroup("pg-big", "q1", 1), big)
	burst := vgpuPod("burst", "pg-burst", 1, 6000, 10)
	pc.submit("pg-burst", "q1", "low", 1, burst)
	small := vgpuPod("small", "pg-small", 1, 4000, 10)
	pc.submit("pg-small", "q1", "low", 1, small)

	var bigMsg, burstMsg string
	var bigPhase schedulingv1beta1.PodGroupPhase
	var q1 *vcapi.QueueInfo
	pc.session(func(ssn *framework.Session) {
		bigMsg, burstMsg = fitMessage(ssn, big), fitMessage(ssn, burst)
		for _, job := range ssn.Jobs {
			if job.Name == "pg-big" {
				bigPhase = schedulingv1beta1.PodGroupPhase(job.PodGroup.Status.Phase)
			}
		}
		q1 = ssn.Queues["q1"]
	})
	binds := pc.waitBinds(1)
	if _, ok := binds[testNamespace+"/small"]; !ok || len(binds) != 2 {
		t.Errorf("bound %v, want two-cards and small only", vgpuCards(binds))
	}
	pc.expectNoBind()
	if bigPhase != schedulingv1beta1.PodGroupPending {
		t.Errorf("pg-big phase %q, want Pending (not enqueued)", bigPhase)
	}
	for name, msg := range map[string]string{"big": bigMsg, "burst": burstMsg} {
		if !containsAll(msg, queuecap.ReasonQueueCapability, "queue q1", "volcano.sh/vgpu-memory") {
			t.Errorf("%s: reason %q does not name the queue's capability on volcano.sh/vgpu-memory", name, msg)
		}
	}
	got := q1.Queue.Status.Allocated[v1.ResourceName("volcano.sh/vgpu-memory")]
	if got.Value() != 16000 {
		t.Errorf("queue q1 status.allocated vgpu-memory = %s, want 16000 (2 cards x 8000 MiB)", got.String())
	}
	if cards := q1.Queue.Status.Allocated[v1.ResourceName("volcano.sh/vgpu-number")]; cards.Value() != 2 {
		t.Errorf("queue q1 status.allocated vgpu-number = %s, want 2", cards.String())
	}
	if strings.Contains(bigMsg, "burst") {
		t.Errorf("reasons mixed up: %q", bigMsg)
	}
}

// TestQueueCapabilityOnAscendMemory: HAMi Ascend rounds a memory request up
// to a template (3000 MiB takes a 3072 MiB vir01). Volcano's queue plugins
// count the pod spec (6000 for two pods, so a third asking 100 would fit
// under 6200); the plugin counts what the chips hold (6144) and stops it,
// and the queue's status shows the rounded amount.
func TestQueueCapabilityOnAscendMemory(t *testing.T) {
	memory := v1.ResourceName("huawei.com/" + chip310P + "-memory")
	queues := []*schedulingv1beta1.Queue{util.BuildQueue("q1", 1, v1.ResourceList{memory: resource.MustParse("6200")})}
	pc := newPreemptCluster(t, preemptConf("enqueue, allocate", ascendArgs), []*v1.Node{npuNode("n1", true, "NPU-0", "NPU-1")}, queues)
	pc.place("low", "q1", npuPod("a", "pg-a", 3000))
	pc.place("low", "q1", npuPod("b", "pg-b", 3000))

	c := npuPod("c", "pg-c", 100)
	pc.submit("pg-c", "q1", "low", 1, c)
	var msg string
	var q1 *vcapi.QueueInfo
	pc.session(func(ssn *framework.Session) { msg, q1 = fitMessage(ssn, c), ssn.Queues["q1"] })
	pc.expectNoBind()
	if !containsAll(msg, queuecap.ReasonQueueCapability, "queue q1", string(memory)) {
		t.Errorf("reason %q does not name the queue's capability on %s", msg, memory)
	}
	if got := q1.Queue.Status.Allocated[memory]; got.Value() != 2*3072 {
		t.Errorf("queue q1 status.allocated %s = %s, want %d (two vir01 templates)", memory, got.String(), 2*3072)
	}
}

// TestAscendPreemption: a high-priority vNPU pod evicts the low-priority
// holder of the chip it needs and is pipelined onto it.
func TestAscendPreemption(t *testing.T) {
	pc := newPreemptCluster(t, preemptConf("enqueue, allocate, preempt", ascendArgs), []*v1.Node{npuNode("n1", true, "NPU-0")}, nil)
	pc.place("low", "default", npuPod("low", "pg-low", 12000))
	high := withPriority(npuPod("high", "pg-high", 12000), prioHigh)
	pc.submit("pg-high", "default", "high", 1, high)
	var reserved map[string]string
	pc.session(func(ssn *framework.Session) { reserved = pipelinedAnnotations(pc, ssn, high) })
	if diff := cmp.Diff([]string{testNamespace + "/low"}, pc.evictions(1)); diff != "" {
		t.Errorf("evicted (-want +got):\n%s", diff)
	}
	if got := reserved[keys310P.Allocated]; !strings.HasPrefix(got, "NPU-0,") {
		t.Errorf("preemptor reservation %q, want pipelined onto NPU-0", got)
	}
}
