//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// preemptSchedulerConf runs the preempt action, with deviceshare in the first
// tier beside priority (the tier whose victim functions decide) and gang's
// victim function off.
const preemptSchedulerConf = `actions: "enqueue, allocate, preempt, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
  - name: deviceshare
    arguments:
      deviceshare.VGPUEnable: true
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
`

// TestPreemptVGPUByPriorityClass: a low-priority Job fills every card of a
// node with 3/4 of its memory; a high-priority pod asking for half a card
// evicts exactly one low-priority pod, takes its card and runs. The evicted
// pod comes back (the Job keeps its replicas) and waits.
func TestPreemptVGPUByPriorityClass(t *testing.T) {
	const ns, node = "preempt", "gpu-node-0"
	ctx := setup(t, ns, 6*time.Minute)
	usePreemptScheduler(ctx, t)
	for name, value := range map[string]int32{"vshare-low": 10, "vshare-high": 100000} {
		pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
		if _, err := cluster.Kube.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create priority class %s: %v", name, err)
		}
		t.Cleanup(func() {
			_ = cluster.Kube.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
		})
	}
	cards, err := cluster.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var n, mem int
	for _, c := range cards {
		if c.Node == node {
			n, mem = n+1, c.MemoryMiB
		}
	}
	if n == 0 {
		t.Fatalf("node %s registers no card", node)
	}

	low := prioritizedJob(ns, "low", "vshare-low", int32(n), int64(mem*3/4), node)
	if err := cluster.CreateJob(ctx, low); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, low.Name) })
	if err := cluster.WaitJobRunning(ctx, ns, low.Name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	before, err := cluster.JobPods(ctx, ns, low.Name)
	if err != nil {
		t.Fatal(err)
	}
	cardOf := map[string]string{} // low pod UID -> card
	for _, p := range before {
		cardOf[string(p.UID)] = firstCardOf(p)
	}

	high := prioritizedJob(ns, "high", "vshare-high", 1, int64(mem/2), node)
	if err := cluster.CreateJob(ctx, high); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, high.Name) })
	if err := cluster.WaitJobRunning(ctx, ns, high.Name, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	hp, err := cluster.JobPods(ctx, ns, high.Name)
	if err != nil || len(hp) != 1 {
		t.Fatalf("high job pods %d, err %v", len(hp), err)
	}
	card := firstCardOf(hp[0])

	// Exactly one original low pod is gone, and it held the preemptor's card;
	// the survivors keep running and none shares that card.
	var gone []string
	err = cluster.Poll(ctx, time.Minute, "the low job's survivors", func(ctx context.Context) (bool, error) {
		after, err := cluster.JobPods(ctx, ns, low.Name)
		if err != nil {
			return false, err
		}
		alive := map[string]bool{}
		for _, p := range after {
			if _, original := cardOf[string(p.UID)]; original && p.Status.Phase == v1.PodRunning && p.DeletionTimestamp == nil {
				alive[string(p.UID)] = true
			}
		}
		gone = gone[:0]
		for uid, c := range cardOf {
			if !alive[uid] {
				gone = append(gone, c)
			}
		}
		return len(gone) == 1, nil
	})
	if err != nil {
		t.Fatalf("%v: evicted pods held cards %v, want exactly one (on %s)", err, gone, card)
	}
	if gone[0] != card {
		t.Errorf("the evicted pod held %s, the preemptor runs on %s", gone[0], card)
	}
}

// usePreemptScheduler runs the scheduler with preemptSchedulerConf for the
// rest of the test, and the cluster's default one again afterwards.
func usePreemptScheduler(ctx context.Context, t *testing.T) {
	t.Helper()
	cluster.StopScheduler()
	t.Cleanup(func() {
		cluster.StopScheduler()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cluster.StartScheduler(ctx); err != nil {
			t.Errorf("start the default scheduler again: %v", err)
		}
	})
	if err := cluster.StartSchedulerWith(ctx, framework.SchedulerSpec{Conf: preemptSchedulerConf}); err != nil {
		t.Fatal(err)
	}
}

// prioritizedJob is a Job of replicas single-vGPU pods of memMiB each on
// node, with the priority class, that starts with any one pod and keeps its
// replicas when one is evicted.
func prioritizedJob(ns, name, class string, replicas int32, memMiB int64, node string) *batchv1alpha1.Job {
	job := framework.VGPUJob(ns, name, framework.VGPUTask{Name: "w", Replicas: replicas, VGPUs: 1, MemoryMiB: memMiB,
		NodeSelector: map[string]string{"kubernetes.io/hostname": node}})
	one := int32(1)
	job.Spec.MinAvailable = 1
	job.Spec.Tasks[0].MinAvailable = &one
	job.Spec.PriorityClassName = class
	job.Spec.Tasks[0].Template.Spec.PriorityClassName = class
	job.Spec.Policies = []batchv1alpha1.LifecyclePolicy{{Event: busv1alpha1.PodEvictedEvent, Action: busv1alpha1.SyncJobAction}}
	return job
}

// firstCardOf returns the node and first card of a pod's vGPU allocation.
func firstCardOf(p v1.Pod) string {
	card, _, _ := strings.Cut(p.Annotations[vgpuproto.AnnotationIDs], ",")
	return fmt.Sprintf("%s/%s", p.Spec.NodeName, card)
}
