//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"

	"github.com/vgpushare/vshare/e2e/framework"
)

// TestSchedulerRestartNoDoubleAllocation: the scheduler is stopped as soon as
// a gang has a bound pod (on this machine the whole gang is usually bound by
// then; the 100 ms poll cannot catch the middle of a bind reliably) and a new
// one is started. The new process has none of the old one's assumed
// allocations and must rebuild card usage from the pods' annotations, so a
// second job fills exactly the free cards and a third, which would fit only
// on a card already taken, waits.
func TestSchedulerRestartNoDoubleAllocation(t *testing.T) {
	const ns = "restart"
	ctx := setup(t, ns, 5*time.Minute)
	half := int32(len(gpuNodes) * cardsPerNode / 2)

	first := framework.VGPUJob(ns, "first", framework.VGPUTask{Name: "a", Replicas: half, VGPUs: 1, MemoryMiB: fillMiB})
	if err := cluster.CreateJob(ctx, first); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, first.Name) })
	err := cluster.Poll(ctx, time.Minute, "a pod of job first bound", func(ctx context.Context) (bool, error) {
		pods, err := cluster.JobPods(ctx, ns, first.Name)
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				return true, nil
			}
		}
		return false, err
	})
	if err != nil {
		t.Fatal(err)
	}
	cluster.StopScheduler()
	t.Log("scheduler stopped as soon as job first had a bound pod; starting a new one")
	if err := cluster.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	if err := cluster.WaitJobRunning(ctx, ns, first.Name, time.Minute); err != nil {
		t.Fatal(err)
	}

	second := framework.VGPUJob(ns, "second", framework.VGPUTask{Name: "b", Replicas: half, VGPUs: 1, MemoryMiB: fillMiB})
	mustRun(ctx, t, second)
	checkNoOvercommit(ctx, t)
	cards, err := cluster.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cards {
		if len(c.Holders) != 1 {
			t.Errorf("card %s on %s has %d holders, want 1 (each of %d pods needs a card of its own): %+v",
				c.UUID, c.Node, len(c.Holders), 2*half, c.Holders)
		}
	}

	third := framework.VGPUJob(ns, "third", framework.VGPUTask{Name: "c", Replicas: 1, VGPUs: 1, MemoryMiB: fillMiB})
	if err := cluster.CreateJob(ctx, third); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, third.Name) })
	err = cluster.Poll(ctx, time.Minute, "job third Unschedulable for vGPU memory", func(ctx context.Context) (bool, error) {
		pg, pod := cluster.UnschedulableMessages(ctx, ns, third.Name)
		return strings.Contains(pg, "insufficient vGPU memory on card"), fmt.Errorf("podgroup %q, pod %q", pg, pod)
	})
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cluster.JobPods(ctx, ns, third.Name)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pods {
		if p.Spec.NodeName != "" {
			t.Errorf("pod %s bound to %s although every card is taken", p.Name, p.Spec.NodeName)
		}
	}
}

// TestBurstAcrossSchedulerRestart: ten gangs of four half-card pods (16000
// MiB each, so two fit per 40960 MiB card) arrive at once, and the scheduler
// is killed (SIGKILL) as soon as one of them is bound, then started again.
// One session places everything in milliseconds, so in practice the old
// process has bound all 32 slots; the new one must read them back from the
// pods and keep the last two gangs waiting. The cluster has 16 cards, 32
// half-card slots: exactly eight gangs run, every card holds exactly two
// pods, and the other two gangs wait for memory.
func TestBurstAcrossSchedulerRestart(t *testing.T) {
	const (
		ns      = "burst"
		jobs    = 10
		perJob  = 4
		halfMiB = 16000
	)
	ctx := setup(t, ns, 5*time.Minute)
	slots := len(gpuNodes) * cardsPerNode * 2
	for i := range jobs {
		job := framework.VGPUJob(ns, fmt.Sprintf("burst-%d", i), framework.VGPUTask{Name: "w", Replicas: perJob, VGPUs: 1, MemoryMiB: halfMiB, Cores: 25})
		if err := cluster.CreateJob(ctx, job); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, job.Name) })
	}
	var bound int
	err := cluster.Poll(ctx, time.Minute, "a burst pod bound", func(ctx context.Context) (bool, error) {
		var err error
		bound, err = boundPods(ctx, ns)
		return bound > 0, err
	})
	if err != nil {
		t.Fatal(err)
	}
	cluster.KillScheduler()
	t.Logf("scheduler killed with %d of %d burst pods seen bound", bound, jobs*perJob)
	if err := cluster.StartScheduler(ctx); err != nil {
		t.Fatal(err)
	}
	var running int
	err = cluster.Poll(ctx, 2*time.Minute, fmt.Sprintf("%d gangs Running", slots/perJob), func(ctx context.Context) (bool, error) {
		list, err := cluster.Volcano.BatchV1alpha1().Jobs(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		running = 0
		for _, j := range list.Items {
			if j.Status.State.Phase == batchv1alpha1.Running {
				running++
			}
		}
		return running == slots/perJob, fmt.Errorf("%d gangs Running", running)
	})
	if err != nil {
		t.Fatal(err)
	}
	checkNoOvercommit(ctx, t)
	cards, err := cluster.Usage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range cards {
		if len(c.Holders) != 2 {
			t.Errorf("card %s on %s holds %d pods, want 2: %+v", c.UUID, c.Node, len(c.Holders), c.Holders)
		}
	}
	if n, err := boundPods(ctx, ns); err != nil || n != slots {
		t.Errorf("%d pods bound (err %v), want %d", n, err, slots)
	}
	list, err := cluster.Volcano.BatchV1alpha1().Jobs(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range list.Items {
		if j.Status.State.Phase == batchv1alpha1.Running {
			continue
		}
		err := cluster.Poll(ctx, 30*time.Second, "job "+j.Name+" waiting for vGPU memory", func(ctx context.Context) (bool, error) {
			pg, pod := cluster.UnschedulableMessages(ctx, ns, j.Name)
			return strings.Contains(pg, "insufficient vGPU memory on card"), fmt.Errorf("podgroup %q, pod %q", pg, pod)
		})
		if err != nil {
			t.Error(err)
		}
	}
}

// boundPods counts the namespace's pods with a node.
func boundPods(ctx context.Context, ns string) (int, error) {
	pods, err := cluster.Kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range pods.Items {
		if p.Spec.NodeName != "" {
			n++
		}
	}
	return n, nil
}
