//go:build e2e

package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	batchv1alpha1 "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	busv1alpha1 "volcano.sh/apis/pkg/apis/bus/v1alpha1"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// jobShape is one kind of Job the workload submits: a task template per
// random source.
type jobShape struct {
	name   string
	weight int
	task   func(r *rand.Rand) VGPUTask
}

func pick[T any](r *rand.Rand, xs ...T) T { return xs[r.IntN(len(xs))] }

// jobShapes mix fractions of a card by memory and cores, whole cards,
// percentage memory and two-card pods. On 40960 MiB cards the mix makes
// memory and cores run out in turn.
var jobShapes = []jobShape{
	{"small", 4, func(r *rand.Rand) VGPUTask {
		return VGPUTask{VGPUs: 1, MemoryMiB: pick[int64](r, 2000, 4000, 6000), Cores: pick[int64](r, 0, 10, 20)}
	}},
	{"quarter", 4, func(r *rand.Rand) VGPUTask {
		return VGPUTask{VGPUs: 1, MemoryMiB: pick[int64](r, 8000, 10240, 12000), Cores: pick[int64](r, 25, 30)}
	}},
	{"half", 3, func(r *rand.Rand) VGPUTask {
		return VGPUTask{VGPUs: 1, MemoryMiB: pick[int64](r, 16000, 20000), Cores: pick[int64](r, 40, 50)}
	}},
	{"large", 2, func(r *rand.Rand) VGPUTask {
		return VGPUTask{VGPUs: 1, MemoryMiB: pick[int64](r, 24000, 30000), Cores: pick[int64](r, 50, 70)}
	}},
	{"whole", 1, func(r *rand.Rand) VGPUTask {
		return VGPUTask{VGPUs: 1, MemoryMiB: 40960, Cores: 100}
	}},
	{"percent", 2, func(r *rand.Rand) VGPUTask {
		return VGPUTask{VGPUs: 1, Cores: 25, Limits: v1.ResourceList{
			vgpuproto.ResourceMemoryPercentage: *resource.NewQuantity(pick[int64](r, 25, 50), resource.DecimalSI)}}
	}},
	{"two-card", 2, func(r *rand.Rand) VGPUTask {
		return VGPUTask{VGPUs: 2, MemoryMiB: pick[int64](r, 8000, 16000), Cores: pick[int64](r, 20, 40)}
	}},
}

// liveJob is a submitted Job the workload has not deleted yet.
type liveJob struct {
	name     string
	pods     int
	deadline time.Time
}

// workload submits and deletes Volcano Jobs continuously, keeping about
// targetPods pods asked for. Its random source is its own, so a seed gives
// the same sequence of Jobs whatever the faults do.
type workload struct {
	c          *Cluster
	ns         string
	r          *rand.Rand
	targetPods int
	lifetime   [2]time.Duration
	live       []liveJob
	seq        int
	collected  time.Time
	// Submitted, Deleted and Pods count Jobs created, Jobs deleted and the
	// pods they asked for; Failed the Jobs Volcano's job controller failed
	// (and the workload then deleted).
	Submitted, Deleted, Pods, Failed int
}

// reap deletes the Jobs Volcano's job controller marked Failed, as their
// user would, and the pods of deleted Jobs. A pod the kubelet fails restarts
// its Job (RestartJob), but a failure the controller sees as belonging to an
// older version of the Job fails the Job instead (Volcano's applyPolicies);
// its pods then stay Failed until someone deletes the Job.
func (w *workload) reap(ctx context.Context) {
	jobs, err := w.c.Volcano.BatchV1alpha1().Jobs(w.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for _, j := range jobs.Items {
		if j.Status.State.Phase != batchv1alpha1.Failed || j.DeletionTimestamp != nil {
			continue
		}
		if err := w.c.deleteJobNow(ctx, w.ns, j.Name); err != nil {
			continue
		}
		w.Failed++
		w.live = slices.DeleteFunc(w.live, func(l liveJob) bool { return l.name == j.Name })
	}
	_ = w.c.collectGarbage(ctx, w.ns)
}

// run works until ctx ends.
func (w *workload) run(ctx context.Context) {
	for ctx.Err() == nil {
		now := time.Now()
		kept := w.live[:0]
		for _, j := range w.live {
			if now.After(j.deadline) {
				if err := w.c.deleteJobNow(ctx, w.ns, j.name); err == nil {
					w.Deleted++
					continue
				}
			}
			kept = append(kept, j)
		}
		w.live = kept
		if w.livePods() < w.targetPods {
			w.submit(ctx)
		}
		if now.Sub(w.collected) > 2*time.Second {
			w.reap(ctx)
			w.collected = now
		}
		wait := time.Duration(200+w.r.IntN(600)) * time.Millisecond
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func (w *workload) livePods() int {
	n := 0
	for _, j := range w.live {
		n += j.pods
	}
	return n
}

// submit creates one Job of a random shape: one to four pods, a gang.
func (w *workload) submit(ctx context.Context) {
	total := 0
	for _, s := range jobShapes {
		total += s.weight
	}
	x := w.r.IntN(total)
	shape := jobShapes[0]
	for _, s := range jobShapes {
		if x < s.weight {
			shape = s
			break
		}
		x -= s.weight
	}
	task := shape.task(w.r)
	task.Name = "w"
	task.Replicas = int32(pick(w.r, 1, 1, 1, 2, 2, 3, 4))
	w.seq++
	name := fmt.Sprintf("%s-%d", shape.name, w.seq)
	life := w.lifetime[0] + time.Duration(w.r.Int64N(int64(w.lifetime[1]-w.lifetime[0])))
	job := VGPUJob(w.ns, name, task)
	// A pod the kubelet fails (an admission error while an agent is down,
	// a card gone unhealthy) restarts the Job, as users configure it.
	job.Spec.Policies = []batchv1alpha1.LifecyclePolicy{{Event: busv1alpha1.PodFailedEvent, Action: busv1alpha1.RestartJobAction}}
	job.Spec.MaxRetry = 1000
	if err := w.c.CreateJob(ctx, job); err != nil {
		return // the API server may be busy; the next tick submits another
	}
	w.Submitted++
	w.Pods += int(task.Replicas)
	w.live = append(w.live, liveJob{name: name, pods: int(task.Replicas), deadline: time.Now().Add(life)})
}

// deleteAll deletes every Job the workload still has.
func (w *workload) deleteAll(ctx context.Context) {
	for _, j := range w.live {
		if err := w.c.deleteJobNow(ctx, w.ns, j.name); err == nil {
			w.Deleted++
		}
	}
	w.live = nil
}

// collectGarbage deletes the namespace's pods whose Job is gone, as the
// garbage collector would (the harness runs none): the job controller may
// recreate a pod of a Job just deleted.
func (c *Cluster) collectGarbage(ctx context.Context, namespace string) error {
	jobs, err := c.Volcano.BatchV1alpha1().Jobs(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list jobs in %s: %w", namespace, err)
	}
	exists := map[string]bool{}
	for _, j := range jobs.Items {
		exists[j.Name] = true
	}
	pods, err := c.Kube.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list pods in %s: %w", namespace, err)
	}
	for _, p := range pods.Items {
		if job := p.Labels[JobNameLabel]; job != "" && !exists[job] && p.DeletionTimestamp == nil {
			_ = c.Kube.CoreV1().Pods(namespace).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}
	}
	return nil
}

// deleteJobNow deletes the Job, its pods and its PodGroup without waiting
// (DeleteJob waits, and its poll fails while an agent is down on purpose).
func (c *Cluster) deleteJobNow(ctx context.Context, namespace, name string) error {
	err := c.Volcano.BatchV1alpha1().Jobs(namespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete job %s/%s: %w", namespace, name, err)
	}
	sel := metav1.ListOptions{LabelSelector: JobNameLabel + "=" + name}
	if err := c.Kube.CoreV1().Pods(namespace).DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
		return fmt.Errorf("delete pods of job %s/%s: %w", namespace, name, err)
	}
	pgs, err := c.Volcano.SchedulingV1beta1().PodGroups(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list podgroups in %s: %w", namespace, err)
	}
	for _, pg := range pgs.Items {
		if ownedByJob(pg.OwnerReferences, name) {
			_ = c.Volcano.SchedulingV1beta1().PodGroups(namespace).Delete(ctx, pg.Name, metav1.DeleteOptions{})
		}
	}
	return nil
}
