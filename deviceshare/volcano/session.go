package volcano

import (
	v1 "k8s.io/api/core/v1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"
)

// EachTask calls f for every task of the session in the status, with its
// job, through the jobs' per-status task index.
func EachTask(ssn *framework.Session, status vcapi.TaskStatus, f func(job *vcapi.JobInfo, task *vcapi.TaskInfo)) {
	for _, job := range ssn.Jobs {
		for _, task := range job.TaskStatusIndex[status] {
			f(job, task)
		}
	}
}

// EachReleasing calls f for the pod of every task on the node that is
// terminating (status Releasing): its resources are the node's future
// idle capacity, as Volcano counts them in FutureIdle.
func EachReleasing(node *vcapi.NodeInfo, f func(pod *v1.Pod)) {
	for _, task := range node.Tasks {
		if task.Status == vcapi.Releasing && task.Pod != nil {
			f(task.Pod)
		}
	}
}

// NodeIdle returns the named node's idle resources in the session, nil
// when the session does not know the node.
func NodeIdle(ssn *framework.Session, node string) *vcapi.Resource {
	if ni := ssn.Nodes[node]; ni != nil {
		return ni.Idle
	}
	return nil
}

// WillBind reports whether Volcano's allocate action binds the task on the
// node now, its request fitting the node's idle resources, rather than
// pipelining it onto resources terminating pods will free.
func WillBind(task *vcapi.TaskInfo, node *vcapi.NodeInfo) bool {
	return task.InitResreq != nil && node.Idle != nil && task.InitResreq.LessEqual(node.Idle, vcapi.Zero)
}

// Pipelined reports whether the task's allocation is a pipeline onto
// resources terminating pods will free (bound in a later session, if at
// all) rather than one to bind now.
func Pipelined(task *vcapi.TaskInfo) bool { return task.Status == vcapi.Pipelined }

// SetFitError records reason as the task's fit error in its job, where
// Volcano reads it for the PodGroup's Unschedulable condition and the
// pod's events. The predicates replace it with per-node errors when they
// run.
func SetFitError(job *vcapi.JobInfo, task *vcapi.TaskInfo, reason string) {
	if job.NodesFitErrors == nil {
		job.NodesFitErrors = make(map[vcapi.TaskID]*vcapi.FitErrors)
	}
	fe := vcapi.NewFitErrors()
	fe.SetError(reason)
	job.NodesFitErrors[task.UID] = fe
}

// ReportHeld writes what a running task holds of the device resources
// (resource name to amount, in the units pods ask for) into the session's
// copy of its request, which Volcano sums into its queue's
// status.allocated after the plugins close. The cache's task is untouched.
func ReportHeld(task *vcapi.TaskInfo, held map[string]float64) {
	if task.Resreq == nil || len(held) == 0 {
		return
	}
	if task.Resreq.ScalarResources == nil {
		task.Resreq.ScalarResources = make(map[v1.ResourceName]float64, len(held))
	}
	for k, v := range held {
		// Volcano keeps scalar resources in milli-units.
		task.Resreq.ScalarResources[v1.ResourceName(k)] = v * 1000
	}
}
