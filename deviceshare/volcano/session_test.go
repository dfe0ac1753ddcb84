package volcano

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"
)

// task builds a task of a pod on node asking for cpu, in the pod phase
// Volcano maps to the wanted status (deleting pods are Releasing).
func task(name, node, cpu string, phase v1.PodPhase, deleting bool) *vcapi.TaskInfo {
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: v1.PodSpec{NodeName: node, Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Requests: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu)}}}}},
		Status: v1.PodStatus{Phase: phase}}
	if deleting {
		now := metav1.Now()
		pod.DeletionTimestamp = &now
	}
	return vcapi.NewTaskInfo(pod)
}

func node(name, cpu string, tasks ...*vcapi.TaskInfo) *vcapi.NodeInfo {
	ni := vcapi.NewNodeInfo(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: v1.NodeStatus{Allocatable: v1.ResourceList{v1.ResourceCPU: resource.MustParse(cpu),
			v1.ResourcePods: resource.MustParse("110")}}})
	for _, t := range tasks {
		if err := ni.AddTask(t); err != nil {
			panic(err)
		}
	}
	return ni
}

func TestEachTask(t *testing.T) {
	pending, running := task("p", "", "1", v1.PodPending, false), task("r", "n1", "1", v1.PodRunning, false)
	ssn := &framework.Session{Jobs: map[vcapi.JobID]*vcapi.JobInfo{"j": vcapi.NewJobInfo("j", pending, running)}}
	for _, tc := range []struct {
		status vcapi.TaskStatus
		want   []string
	}{
		{status: vcapi.Pending, want: []string{"p"}},
		{status: vcapi.Running, want: []string{"r"}},
		{status: vcapi.Releasing},
	} {
		var got []string
		EachTask(ssn, tc.status, func(job *vcapi.JobInfo, task *vcapi.TaskInfo) {
			if job.UID != "j" {
				t.Errorf("task %s passed with job %s, want j", task.Name, job.UID)
			}
			got = append(got, task.Name)
		})
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("EachTask(%v) (-want +got):\n%s", tc.status, diff)
		}
	}
}

func TestEachReleasing(t *testing.T) {
	ni := node("n1", "8", task("gone", "n1", "1", v1.PodRunning, true), task("stays", "n1", "1", v1.PodRunning, false))
	var got []string
	EachReleasing(ni, func(pod *v1.Pod) { got = append(got, pod.Name) })
	if !slices.Equal(got, []string{"gone"}) {
		t.Errorf("EachReleasing = %v, want [gone]", got)
	}
}

func TestNodeIdleAndWillBind(t *testing.T) {
	ni := node("n1", "4", task("r", "n1", "3", v1.PodRunning, false))
	ssn := &framework.Session{Nodes: map[string]*vcapi.NodeInfo{"n1": ni}}
	if idle := NodeIdle(ssn, "n1"); idle == nil || idle.MilliCPU != 1000 {
		t.Errorf("NodeIdle(n1) = %v, want 1 CPU", idle)
	}
	if idle := NodeIdle(ssn, "n2"); idle != nil {
		t.Errorf("NodeIdle of an unknown node = %v, want nil", idle)
	}
	if small := task("s", "", "1", v1.PodPending, false); !WillBind(small, ni) {
		t.Errorf("WillBind of a task fitting the idle CPU = false")
	}
	if big := task("b", "", "2", v1.PodPending, false); WillBind(big, ni) {
		t.Errorf("WillBind of a task larger than the idle CPU = true")
	}
}

func TestPipelined(t *testing.T) {
	tk := task("p", "", "1", v1.PodPending, false)
	if Pipelined(tk) {
		t.Errorf("Pipelined of a pending task = true")
	}
	tk.Status = vcapi.Pipelined
	if !Pipelined(tk) {
		t.Errorf("Pipelined of a pipelined task = false")
	}
}

func TestSetFitError(t *testing.T) {
	tk := task("p", "", "1", v1.PodPending, false)
	job := vcapi.NewJobInfo("j", tk)
	SetFitError(job, tk, "invalid device request")
	fe := job.NodesFitErrors[tk.UID]
	if fe == nil || fe.Error() != "invalid device request" {
		t.Errorf("fit error = %v, want %q", fe, "invalid device request")
	}
}

func TestReportHeld(t *testing.T) {
	tk := task("r", "n1", "1", v1.PodRunning, false)
	ReportHeld(tk, map[string]float64{"volcano.sh/vgpu-memory": 2048, "volcano.sh/vgpu-number": 1})
	// Volcano counts every task as one pod.
	want := map[v1.ResourceName]float64{"pods": 1, "volcano.sh/vgpu-memory": 2048000, "volcano.sh/vgpu-number": 1000}
	if diff := cmp.Diff(want, tk.Resreq.ScalarResources); diff != "" {
		t.Errorf("scalar resources in milli-units (-want +got):\n%s", diff)
	}
	ReportHeld(tk, nil)
	if diff := cmp.Diff(want, tk.Resreq.ScalarResources); diff != "" {
		t.Errorf("ReportHeld of nothing changed the request (-want +got):\n%s", diff)
	}
}

func TestEvictingActionsEnabledWithoutConfiguration(t *testing.T) {
	// No scheduler configuration is loaded in unit tests: the actions are
	// unknown, and count as enabled.
	if !EvictingActionsEnabled() {
		t.Errorf("EvictingActionsEnabled without a configuration = false, want true")
	}
}
