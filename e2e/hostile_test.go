//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/e2e/framework"
)

// TestImpossibleRequestsStayPendingWithAReason: requests that can never fit
// or are not valid (a card larger than any, more cores than a card has, a
// million cards, a memory percentage above 100, a task priority outside
// 0..1, a mode or card selector that names nothing) are refused with a
// reason naming the request, stay Pending unbound, do not stop a valid Job
// from running next to them, and are not retried in a hot loop: over a quiet
// window the scheduler keeps running (same process, no panic) and the events
// about them do not pile up.
func TestImpossibleRequestsStayPendingWithAReason(t *testing.T) {
	const ns = "impossible"
	ctx := setup(t, ns, 5*time.Minute)
	q := func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
	jobs := []struct {
		name string
		task framework.VGPUTask
		want string // in the PodGroup's Unschedulable condition
	}{
		{name: "huge-memory", task: framework.VGPUTask{VGPUs: 1, MemoryMiB: 1 << 40}, want: "volcano.sh/vgpu-memory=1099511627776"},
		{name: "card-larger-than-any", task: framework.VGPUTask{VGPUs: 1, MemoryMiB: 50000}, want: "vGPU card memory smaller than requested"},
		{name: "cores-above-100", task: framework.VGPUTask{VGPUs: 1, MemoryMiB: 1000, Cores: 1000}, want: "volcano.sh/vgpu-cores=1k"},
		{name: "million-cards", task: framework.VGPUTask{VGPUs: 1000000, MemoryMiB: 1000}, want: "volcano.sh/vgpu-number=1M"},
		{name: "percentage-above-100", task: framework.VGPUTask{VGPUs: 1, Limits: v1.ResourceList{"volcano.sh/vgpu-memory-percentage": q(500)}},
			want: "volcano.sh/vgpu-memory-percentage=500"},
		{name: "priority-2", task: framework.VGPUTask{VGPUs: 1, MemoryMiB: 1000, Limits: v1.ResourceList{"volcano.sh/vgpu-priority": q(2)}},
			want: "volcano.sh/vgpu-priority=2: want 0 (high priority) or 1 (low priority)"},
		{name: "nine-cards", task: framework.VGPUTask{VGPUs: 9, MemoryMiB: 1000}, want: "node has fewer vGPU cards than requested"},
		{name: "unknown-mode", task: framework.VGPUTask{VGPUs: 1, MemoryMiB: 1000, Annotations: map[string]string{"volcano.sh/vgpu-mode": "turbo"}},
			want: `volcano.sh/vgpu-mode="turbo"`},
		{name: "no-such-card", task: framework.VGPUTask{VGPUs: 1, MemoryMiB: 1000, Annotations: map[string]string{"volcano.sh/vgpu-use-gpuuuid": "GPU-nonexistent"}},
			want: "vGPU card excluded by vgpu-use-gpuuuid or vgpu-nouse-gpuuuid"},
	}
	for _, j := range jobs {
		j.task.Name, j.task.Replicas = "w", 1
		job := framework.VGPUJob(ns, j.name, j.task)
		if err := cluster.CreateJob(ctx, job); err != nil {
			t.Fatalf("create %s: %v", j.name, err)
		}
		t.Cleanup(func() { _ = cluster.DeleteJob(context.Background(), ns, job.Name) })
	}
	sched := cluster.SchedulerProcess()
	for _, j := range jobs {
		var pg, pod string
		err := cluster.Poll(ctx, time.Minute, j.name+" to be reported unschedulable", func(ctx context.Context) (bool, error) {
			pg, pod = cluster.UnschedulableMessages(ctx, ns, j.name)
			return strings.Contains(pg, j.want), nil
		})
		if err != nil {
			t.Errorf("%s: %v (PodGroup condition %q, pod condition %q)", j.name, err, pg, pod)
			continue
		}
		t.Logf("%s: %s", j.name, pg)
	}
	// Valid work still runs next to them.
	mustRun(ctx, t, framework.VGPUJob(ns, "valid", framework.VGPUTask{Name: "w", Replicas: 2, VGPUs: 1, MemoryMiB: 1000, Cores: 10}))

	// A quiet window: nothing is bound, the scheduler is the same process,
	// and the events about the impossible Jobs do not grow with the
	// sessions (about 50 in the window at --schedule-period=200ms).
	before, err := eventObjects(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	select { // a measurement window, not a wait for a condition
	case <-time.After(10 * time.Second):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	after, err := eventObjects(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("events in %s: %d objects before the window, %d after", ns, before, after)
	if grown := after - before; grown > len(jobs) {
		t.Errorf("%d new event objects in a 10 s window for %d pending Jobs: the scheduler reports them in a loop", grown, len(jobs))
	}
	if sched != cluster.SchedulerProcess() {
		t.Errorf("the scheduler was replaced during the test")
	}
	if exited, err := sched.Exited(); exited {
		t.Fatalf("the scheduler exited: %v", err)
	}
	if n, err := cluster.SchedulerLogCount("panic"); err != nil || n > 0 {
		t.Errorf("the scheduler log mentions panic %d times (%v)", n, err)
	}
	for _, j := range jobs {
		pods, err := cluster.JobPods(ctx, ns, j.name)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods {
			if p.Spec.NodeName != "" {
				t.Errorf("%s: pod %s was bound to %s", j.name, p.Name, p.Spec.NodeName)
			}
		}
	}
}

// eventObjects counts the Event objects in the namespace.
func eventObjects(ctx context.Context, ns string) (int, error) {
	evs, err := cluster.Kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, fmt.Errorf("list events: %w", err)
	}
	return len(evs.Items), nil
}
