package deviceshare

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	batch "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	schedulingv1beta1 "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

// benchWorkload builds a benchmark's pods and their PodGroups: n pods,
// the same for every implementation.
type benchWorkload func(n int) ([]*v1.Pod, []*schedulingv1beta1.PodGroup)

// benchWorkloadNamed is the workload BENCH_WORKLOAD names (issue 36):
// "anonymous", pods in gangs of four without roles, or "jobs", Volcano
// Jobs with task roles; ok is false for any other name.
func benchWorkloadNamed(name string) (w benchWorkload, ok bool) {
	switch name {
	case "anonymous":
		return func(n int) ([]*v1.Pod, []*schedulingv1beta1.PodGroup) {
			pods, groups := vgpuBenchPods(n)
			return pods, gangsOfFour(groups)
		}, true
	case "jobs":
		return vgpuBenchJobs, true
	}
	return nil, false
}

// benchTask is one task (role) of a benchmark job: replicas pods of one
// shape, n cards of mem MiB and cores percent each.
type benchTask struct {
	name          string
	replicas      int
	n, mem, cores int64
}

// benchJobKind is a kind of job: its name and tasks.
type benchJobKind struct {
	name  string
	tasks []benchTask
}

// benchJobKinds are the jobs vgpuBenchJobs submits, in turn: 15 pods and
// 35 cards per round, about as dense as the anonymous mix per pod (2.3
// cards against 2.5, 21 GiB of memory against 20, a third of a card's
// cores against two fifths), so that neither workload fills the cluster's
// cores first.
func benchJobKinds() []benchJobKind {
	return []benchJobKind{
		{"train", []benchTask{{"master", 1, 1, 12000, 25}, {"worker", 3, 4, 12000, 10}}},
		{"mpi", []benchTask{{"launcher", 1, 1, 2000, 5}, {"worker", 4, 2, 8000, 20}}},
		{"serve", []benchTask{{"server", 5, 1, 6000, 20}, {"batch", 1, 8, 8000, 10}}},
	}
}

// vgpuBenchJobs returns n pods of Volcano Jobs as users submit them: the
// kinds of benchJobKinds in turn, each job's pods carrying what Volcano's
// job controller puts on them (the task-spec annotation and label, which
// the scheduler reads as the pod's role, the task index, job name, queue
// and the PodGroup's name) and one PodGroup per job needing all its pods,
// with MinTaskMember per task as the controller writes it. Pods of one role
// are alike, so Volcano's per-role predicate error cache (PredicateNodes'
// taskPredicateErrorCache, and TaskHasFitErrors) skips the nodes a role's
// earlier pod was rejected on, as it does for real Jobs and cannot for the
// anonymous workload's pods, which have no role. The last job is cut short
// to make n pods.
func vgpuBenchJobs(n int) ([]*v1.Pod, []*schedulingv1beta1.PodGroup) {
	pods := make([]*v1.Pod, 0, n)
	var groups []*schedulingv1beta1.PodGroup
	kinds := benchJobKinds()
	for j := 0; len(pods) < n; j++ {
		kind := kinds[j%len(kinds)]
		job := fmt.Sprintf("%s-%d", kind.name, j)
		pg := podGroup(job+"-uid-"+job, 0)
		pg.Spec.MinTaskMember = map[string]int32{}
		for _, task := range kind.tasks {
			for i := 0; i < task.replicas && len(pods) < n; i++ {
				pods = append(pods, benchJobPod(job, pg.Name, task, i))
				pg.Spec.MinTaskMember[task.name]++
				pg.Spec.MinMember++
			}
		}
		groups = append(groups, pg)
	}
	return pods, groups
}

// benchJobPod is the i-th pod of a job's task, named and labelled as
// Volcano's job controller does (createJobPod).
func benchJobPod(job, group string, task benchTask, i int) *v1.Pod {
	p := vgpuPod(fmt.Sprintf("%s-%s-%d", job, task.name, i), group, task.n, task.mem, task.cores)
	index := strconv.Itoa(i)
	for k, v := range map[string]string{batch.TaskIndex: index, batch.TaskSpecKey: task.name, batch.JobNameKey: job,
		batch.QueueNameKey: "default", batch.JobVersion: "0", batch.PodTemplateKey: job + "-" + task.name} {
		p.Annotations[k] = v
	}
	p.Labels = map[string]string{batch.TaskIndex: index, batch.JobNameKey: job, batch.TaskSpecKey: task.name,
		batch.JobNamespaceKey: p.Namespace, batch.QueueNameKey: "default"}
	return p
}

// TestBenchJobsCarryRoles checks what the Jobs workload is for: every pod
// has the role Volcano reads (TaskInfo.TaskRole, from the task-spec
// annotation), the roles of one job differ in shape, and each PodGroup
// needs exactly its pods, per role as the job controller writes it.
func TestBenchJobsCarryRoles(t *testing.T) {
	pods, groups := vgpuBenchJobs(100)
	if len(pods) != 100 {
		t.Fatalf("%d pods, want 100", len(pods))
	}
	perGroup := map[string]map[string]int32{}
	for _, p := range pods {
		task := vcapi.NewTaskInfo(p)
		if task.TaskRole == "" {
			t.Fatalf("pod %s has no task role", p.Name)
		}
		g := p.Annotations[schedulingv1beta1.KubeGroupNameAnnotationKey]
		if perGroup[g] == nil {
			perGroup[g] = map[string]int32{}
		}
		perGroup[g][task.TaskRole]++
	}
	for _, pg := range groups {
		var all int32
		for _, n := range perGroup[pg.Name] {
			all += n
		}
		if diff := cmp.Diff(perGroup[pg.Name], pg.Spec.MinTaskMember); diff != "" || pg.Spec.MinMember != all {
			t.Errorf("PodGroup %s: MinMember %d for %d pods; MinTaskMember (-pods +group):\n%s", pg.Name, pg.Spec.MinMember, all, diff)
		}
	}
	for _, kind := range benchJobKinds() {
		if len(kind.tasks) < 2 || kind.tasks[0].n == kind.tasks[1].n && kind.tasks[0].mem == kind.tasks[1].mem {
			t.Errorf("job kind %s: want two roles of different shapes, have %+v", kind.name, kind.tasks)
		}
	}
}
