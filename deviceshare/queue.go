package deviceshare

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/plugins/util"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/device/podres"
	"github.com/vgpushare/vshare/deviceshare/queuecap"
	"github.com/vgpushare/vshare/deviceshare/volcano"
)

// Queue capability on device resources.
//
// Volcano v1.10 builds every api.Resource (task requests, queue capability
// and deserved) through api.NewResource, which drops the names in
// IgnoredDevicesList: volcano.sh/vgpu-memory, -memory-percentage and
// -cores. The proportion and capacity plugins therefore never see a queue's
// capability on them, and the names they do see (vgpu-number, GPU share
// memory, Ascend memory) they count from the pod spec, not from what the
// cards hold (a percentage request, an Ascend template rounded up).
//
// The plugin enforces the capability itself, from what pods hold according
// to their allocation annotations (Devices.AddQueueResource): a Job whose
// minimum request would take its queue past its capability on a device
// resource is not enqueued, a task that would is not allocated, and the
// reason names the queue, the resource and the amounts. At session close it
// writes the exact holdings into the running tasks' requests, which is what
// Volcano sums into the queue's status.allocated.

// openQueues builds the queue accounting at session open; nil when no
// queue sets a capability or a deserved amount on a device resource.
func (p *plugin) openQueues(ssn *framework.Session) *queuecap.Accounts {
	var q *queuecap.Accounts
	for id, qi := range ssn.Queues {
		if qi.Queue == nil {
			continue
		}
		for _, spec := range []struct {
			list v1.ResourceList
			into func(*queuecap.Accounts) map[vcapi.QueueID]map[string]float64
		}{
			{qi.Queue.Spec.Capability, func(q *queuecap.Accounts) map[vcapi.QueueID]map[string]float64 { return q.Capability }},
			{qi.Queue.Spec.Deserved, func(q *queuecap.Accounts) map[vcapi.QueueID]map[string]float64 { return q.Deserved }},
		} {
			for name, quantity := range spec.list {
				if !queuecap.IsDeviceResource(name) {
					continue
				}
				if q == nil {
					q = queuecap.New()
				}
				m := spec.into(q)
				if m[id] == nil {
					m[id] = map[string]float64{}
				}
				m[id][string(name)] = quantity.AsApproximateFloat64()
			}
		}
	}
	if q == nil {
		return nil
	}
	s := p.sess
	for _, job := range ssn.Jobs {
		if !q.Tracked(job.Queue) {
			continue
		}
		for status, tasks := range job.TaskStatusIndex {
			if !vcapi.AllocatedStatus(status) {
				continue
			}
			for _, task := range tasks {
				if sn := s.nodes[task.NodeName]; sn != nil && task.Pod != nil {
					queuecap.AddTo(q.Used, job.Queue, s.held(sn, allBackends(len(s.backends)), s.effectivePod(task.Pod)), 1)
				}
			}
		}
		if job.PodGroup != nil && job.PodGroup.Status.Phase == "Inqueue" && len(job.TaskStatusIndex[vcapi.Running]) == 0 {
			queuecap.AddTo(q.Inqueue, job.Queue, p.jobRequest(q, job), 1)
		}
	}
	return q
}

// held is what the pod holds on the node's devices of the given backends,
// by queue resource name.
func (s *sessionState) held(sn *sessionNode, backends []int, pod *v1.Pod) map[string]float64 {
	var out map[string]float64
	for _, i := range backends {
		d := sn.devices[i]
		if d == nil || d.invErr != nil {
			continue
		}
		for k, v := range d.read().AddQueueResource(pod) {
			if out == nil {
				out = make(map[string]float64)
			}
			out[k] += v
		}
	}
	return out
}

func allBackends(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i
	}
	return out
}

// queueOf returns the task's queue.
func (p *plugin) queueOf(task *vcapi.TaskInfo) vcapi.QueueID {
	if p.ssn == nil {
		return ""
	}
	if job, ok := p.ssn.Jobs[task.Job]; ok {
		return job.Queue
	}
	return ""
}

// taskRequest estimates what the task will hold, by queue resource name,
// before any card is chosen: backends that know (device.QueueRequester) say
// so; otherwise the containers' quantities of the capability's resources.
func (p *plugin) taskRequest(q *queuecap.Accounts, queue vcapi.QueueID, task *vcapi.TaskInfo) map[string]float64 {
	s := p.sess
	req := s.requestOf(task)
	if req == nil || task.Pod == nil {
		return nil
	}
	out := map[string]float64{}
	for _, i := range req.backends {
		if qr, ok := s.backends[i].(device.QueueRequester); ok {
			for k, v := range qr.QueueRequest(task.Pod) {
				out[k] += v
			}
		}
	}
	for name := range q.Capability[queue] {
		if _, known := out[name]; known {
			continue
		}
		for i := range task.Pod.Spec.Containers {
			if q, ok := podres.Quantity(&task.Pod.Spec.Containers[i], v1.ResourceName(name)); ok {
				out[name] += q.AsApproximateFloat64()
			}
		}
	}
	return out
}

// jobRequest is the device request of the job's first MinAvailable pending
// tasks (by name), which must fit its queue for the job to start.
func (p *plugin) jobRequest(q *queuecap.Accounts, job *vcapi.JobInfo) map[string]float64 {
	pending := make([]*vcapi.TaskInfo, 0, len(job.TaskStatusIndex[vcapi.Pending]))
	for _, t := range job.TaskStatusIndex[vcapi.Pending] {
		pending = append(pending, t)
	}
	sort.Slice(pending, func(i, j int) bool { return pending[i].Name < pending[j].Name })
	if n := int(job.MinAvailable); n > 0 && n < len(pending) {
		pending = pending[:n]
	}
	out := map[string]float64{}
	for _, t := range pending {
		for k, v := range p.taskRequest(q, job.Queue, t) {
			out[k] += v
		}
	}
	return out
}

// jobEnqueueable is the JobEnqueueableFn: a job whose minimum device
// request would take its queue past its capability is rejected; otherwise
// the plugin abstains (so it never overrides other plugins' votes).
func (p *plugin) jobEnqueueable(obj interface{}) int {
	job, ok := obj.(*vcapi.JobInfo)
	q := p.sess.queues
	if !ok || q == nil || q.Capability[job.Queue] == nil {
		return util.Abstain
	}
	queue := p.ssn.Queues[job.Queue]
	if queue == nil {
		return util.Abstain
	}
	req := p.jobRequest(q, job)
	if msg, over := q.Exceeded(queue, req, true); over {
		klog.V(3).InfoS("Job not enqueued: its queue's device capability is exhausted", "plugin", PluginName,
			"job", klog.KRef(job.Namespace, job.Name), "reason", msg)
		p.recordQueueReason(job, nil, msg)
		p.ssn.RecordPodGroupEvent(job.PodGroup, v1.EventTypeNormal, "Unschedulable", msg)
		return util.Reject
	}
	queuecap.AddTo(q.Inqueue, job.Queue, req, 1)
	return util.Abstain
}

// overused is the OverusedFn: a queue that sets deserved amounts on device
// resources and holds at least all of them may not reclaim (proportion's
// rule, on the resources it cannot see).
func (p *plugin) overused(obj interface{}) bool {
	queue, ok := obj.(*vcapi.QueueInfo)
	q := p.sess.queues
	if !ok || q == nil || len(q.Deserved[queue.UID]) == 0 {
		return false
	}
	return !q.WithinDeserved(queue.UID)
}

// allocatable is the AllocatableFn: the queue's device capability, then an
// ongoing preemption (see preempt.go).
func (p *plugin) allocatable(queue *vcapi.QueueInfo, task *vcapi.TaskInfo) bool {
	if q := p.sess.queues; q != nil && q.Capability[queue.UID] != nil {
		if msg, over := q.Exceeded(queue, p.taskRequest(q, queue.UID, task), false); over {
			klog.V(4).InfoS("Task not allocatable: its queue's device capability is exhausted", "plugin", PluginName,
				"task", klog.KRef(task.Namespace, task.Name), "reason", msg)
			if job := p.ssn.Jobs[task.Job]; job != nil {
				p.recordQueueReason(job, task, msg)
			}
			return false
		}
	}
	return p.preemptionAllows(task)
}

// recordQueueReason makes msg the scheduling reason of the task (or of
// every pending task of the job), which Volcano reports in the PodGroup's
// Unschedulable condition and the pods' events.
func (p *plugin) recordQueueReason(job *vcapi.JobInfo, task *vcapi.TaskInfo, msg string) {
	set := func(t *vcapi.TaskInfo) {
		fe := vcapi.NewFitErrors()
		fe.SetError(msg)
		job.NodesFitErrors[t.UID] = fe
	}
	if job.NodesFitErrors == nil {
		job.NodesFitErrors = make(map[vcapi.TaskID]*vcapi.FitErrors)
	}
	if task != nil {
		set(task)
		return
	}
	for _, t := range job.TaskStatusIndex[vcapi.Pending] {
		set(t)
	}
}

// reportQueueUsage writes what running tasks hold on the devices, from
// their allocation annotations, into their requests, which Volcano sums
// into each queue's status.allocated after the plugins close. The tasks are
// the session's copies; the cache's are untouched.
func (p *plugin) reportQueueUsage(ssn *framework.Session) {
	s := p.sess
	all := allBackends(len(s.backends))
	volcano.EachTask(ssn, vcapi.Running, func(_ *vcapi.JobInfo, task *vcapi.TaskInfo) {
		if sn := s.nodes[task.NodeName]; sn != nil && task.Pod != nil && task.Resreq != nil {
			volcano.ReportHeld(task, s.held(sn, all, s.effectivePod(task.Pod)))
		}
	})
}
