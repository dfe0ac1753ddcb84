package deviceshare

import (
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/util"
)

// TestPreemptionFreesTheVictimsCard runs Volcano's preempt action: a
// high-priority pod that no card can hold evicts the low-priority pod whose
// card it needs, and the eviction's release is what lets it be pipelined.
func TestPreemptionFreesTheVictimsCard(t *testing.T) {
	conf := `
actions: "enqueue, allocate, preempt"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: predicates
  - name: proportion
  - name: deviceshare
    arguments:
` + shareArgs + "\n"
	evictor := util.NewFakeEvictor(10)
	c := newClusterWithEvictor(t, conf, []*v1.Node{gpuNode("n1", 1, 8000)}, evictor)
	low, high := int32(1), int32(1000)

	victim := gpuMemPod("low", "pg-low", 6000)
	victim.Spec.NodeName = "n1"
	victim.Status.Phase = v1.PodRunning
	victim.Spec.Priority = &low
	victim.Annotations["volcano.sh/gpu-index"] = "0"
	pgLow := podGroup("pg-low", 1)
	pgLow.Status.Phase = schedulingv1beta1.PodGroupRunning
	c.addJob(pgLow, victim)

	preemptor := gpuMemPod("high", "pg-high", 6000)
	preemptor.Spec.Priority = &high
	pgHigh := podGroup("pg-high", 1)
	pgHigh.Spec.PriorityClassName = "high"
	c.cache.AddPriorityClass(util.BuildPriorityClass("high", high))
	c.addJob(pgHigh, preemptor)

	var pipelinedIndex string
	var pipelined bool
	c.session(func(ssn *framework.Session) {
		for _, job := range ssn.Jobs {
			for _, task := range job.TaskStatusIndex[vcapi.Pipelined] {
				if task.Name == "high" {
					pipelined = true
					pipelinedIndex = c.st.binder.Decisions.AnnotationsFor(task.Pod.UID)["volcano.sh/gpu-index"]
				}
			}
		}
	})
	if !pipelined || pipelinedIndex != "0" {
		t.Errorf("preemptor pipelined = %v with gpu-index %q, want pipelined onto the victim's card 0", pipelined, pipelinedIndex)
	}
	select {
	case key := <-evictor.Channel:
		if key != testNamespace+"/low" {
			t.Errorf("evicted %s, want %s/low", key, testNamespace)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("the low-priority pod holding the card was not evicted")
	}
	c.expectNoBind() // pipelined until the victim is gone
}
