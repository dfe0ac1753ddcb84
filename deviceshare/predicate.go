package deviceshare

import (
	"math"
	"strings"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/fitcache"
	"github.com/vgpushare/vshare/deviceshare/volcano"
	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Failure reasons the plugin itself reports (backends add per-card ones).
// They are stable strings so Volcano's fit-error histogram groups nodes.
const (
	ReasonNodeLocked         = "node is locked by a device allocation in flight"
	ReasonNoDevicesSuffix    = " devices are not present on the node"
	ReasonBadInventorySuffix = " device registration on the node is invalid"
	ReasonInvalidRequest     = "invalid device request: "
	ReasonUnservedPrefix     = "no enabled device type serves "
	// ReasonTerminating is reported when the pod fits only the cards that
	// terminating pods still hold, and Volcano would bind it now.
	ReasonTerminating = "devices are held by terminating pods"
	// ReasonEvictionWouldNotHelp is reported when the cards would not fit
	// the pod even if every pod Volcano may evict for it were gone.
	ReasonEvictionWouldNotHelp = "evicting lower-priority or reclaimable pods would not free enough devices"
)

// predicate is the PredicateFn: does the task fit the node's cards, and
// its namespace's quotas on them (quota.go)?
func (p *plugin) predicate(task *vcapi.TaskInfo, node *vcapi.NodeInfo) error {
	s := p.sess
	req := s.requestOf(task)
	if req == nil {
		return nil
	}
	if s.quotas != nil && req.unserved == "" && req.invalid == nil {
		if err := p.quotaPrecheck(task, node, req); err != nil {
			return err
		}
	}
	if err := p.deviceFit(task, node, req); err != nil || s.quotas == nil {
		return err
	}
	if idx, ok := s.indexOf(node); ok {
		return p.quotaOnNode(task, node, req, &s.slab[idx])
	}
	return nil
}

// deviceFit is the predicate's device check: the request's problems, node
// locks, then each backend's fit, from the result tables where they hold.
func (p *plugin) deviceFit(task *vcapi.TaskInfo, node *vcapi.NodeInfo, req *taskRequest) error {
	s := p.sess
	if req.unserved != "" {
		p.st.metrics.FilterFailed("request", "unserved resource")
		return s.fitError(task, node, device.UnschedulableAndUnresolvable, ReasonUnservedPrefix+req.unserved)
	}
	if req.invalid != nil {
		p.st.metrics.FilterFailed("request", "invalid request")
		return s.fitError(task, node, device.UnschedulableAndUnresolvable, ReasonInvalidRequest+req.invalid.Error())
	}
	idx, ok := s.indexOf(node)
	if !ok {
		return s.fitError(task, node, device.UnschedulableAndUnresolvable, s.backends[req.backends[0]].Name()+ReasonNoDevicesSuffix)
	}
	if s.args.NodeLockEnable && s.slab[idx].locked() {
		p.st.metrics.FilterFailed("node", ReasonNodeLocked)
		return s.fitError(task, node, device.Unschedulable, ReasonNodeLocked)
	}
	t := req.results
	if t == nil {
		f, _, _ := p.filter(task, node, req, &s.slab[idx])
		return failureError(f, task, node)
	}
	epoch := t.Epoch()
	hit, ent := s.fits.Lookup(t, idx, epoch)
	if hit != nil {
		if f := hit.Fail; f != nil {
			for _, c := range f.Counted {
				p.st.metrics.FilterFailed(c[0], c[1])
			}
			return failureError(f, task, node)
		}
		return nil
	}
	f, score, keep := p.filter(task, node, req, &s.slab[idx])
	if ent != nil && keep {
		s.fits.Fill(ent, idx, epoch, f, score)
	}
	return failureError(f, task, node)
}

// filter is the predicate's device work on a known, unlocked node: each of
// the request's backends' Fit (FilterNode where a backend prepares no
// request). It returns the failure (nil: the node fits), the node's
// weighted score when the node fits and every backend scored in the same
// pass (NaN otherwise: nodeOrder computes it), and whether the outcome
// holds for every task with the same request key (false when it depended
// on the task: the eviction check).
func (p *plugin) filter(task *vcapi.TaskInfo, node *vcapi.NodeInfo, req *taskRequest, sn *sessionNode) (*fitcache.Failure, float64, bool) {
	s := p.sess
	pod := task.Pod
	var statuses []*vcapi.Status
	var counted [][2]string
	fail := func(device, counter string, st *vcapi.Status) {
		statuses = append(statuses, st)
		if counter != "" {
			counted = append(counted, [2]string{device, counter})
			p.st.metrics.FilterFailed(device, counter)
		}
	}
	resolvable, unresolvable := false, false
	var score float64
	for j, i := range req.backends {
		name := s.backends[i].Name()
		d := sn.devices[i]
		switch {
		case d == nil:
			fail(name, "no devices", s.status(device.UnschedulableAndUnresolvable, name+ReasonNoDevicesSuffix))
			unresolvable = true
			continue
		case d.invErr != nil:
			fail(name, "invalid registration", s.status(device.UnschedulableAndUnresolvable, name+ReasonBadInventorySuffix))
			unresolvable = true
			continue
		}
		// The fragment policy's card choice weighs the node's idle CPU and
		// memory: the predicate sees the node as the score and the
		// allocation do.
		host := hostOf(s.args.SchedulePolicy, node.Idle, nil)
		sc, st, scored := fitOn(d.read(), pod, req.prep(j), s.args.SchedulePolicy, host)
		if _, batch := s.backends[i].(device.BatchScorer); !scored && !batch {
			score = math.NaN()
		} else if !batch {
			score += sc
		}
		if st.IsSuccess() {
			if len(d.releasing) > 0 && volcano.WillBind(task, node) {
				if _, now, _ := fitOn(d.now(), pod, req.prep(j), s.args.SchedulePolicy, host); !now.IsSuccess() {
					fail(name, ReasonTerminating, s.status(device.Unschedulable, ReasonTerminating))
				}
			}
			continue
		}
		if st.Code == device.Unschedulable {
			resolvable = true
		} else {
			unresolvable = true
		}
		for _, r := range st.Reasons {
			fail(name, r, s.status(st.Code, r))
		}
		if len(st.Reasons) == 0 {
			fail(name, "", s.status(st.Code, name+" devices do not fit"))
		}
	}
	// Only actions that evict (preempt, reclaim) read whether a failure is
	// resolvable: without them the eviction-feasibility check, which costs
	// a copy of the node's devices per failing node, is skipped.
	keep := true
	if resolvable && !unresolvable && volcano.EvictingActionsEnabled() {
		keep = false
		if pl := s.newPlanner(pod, req, sn); pl != nil && !p.evictionCouldHelp(task, node, pl) {
			for i, st := range statuses {
				statuses[i] = s.status(device.UnschedulableAndUnresolvable, st.Reason)
			}
			statuses = append(statuses, s.status(device.UnschedulableAndUnresolvable, ReasonEvictionWouldNotHelp))
		}
	}
	if len(statuses) == 0 {
		return nil, score * float64(s.args.ScheduleWeight), keep
	}
	return &fitcache.Failure{Statuses: statuses[:len(statuses):len(statuses)], Counted: counted}, math.NaN(), keep
}

// failureError is the predicate's error for a node that failed with f
// (nil for a node that fits). Each call builds its own FitError: Volcano
// stores it per task and sets its node name.
func failureError(f *fitcache.Failure, task *vcapi.TaskInfo, node *vcapi.NodeInfo) error {
	if f == nil {
		return nil
	}
	if klog.V(5).Enabled() {
		klog.V(5).InfoS("Filtered node", "plugin", PluginName, "pod", klog.KObj(task.Pod), "node", node.Name,
			"reasons", reasons(f.Statuses))
	}
	return vcapi.NewFitErrWithStatus(task, node, f.Statuses...)
}

// explainInvalidRequests records the reason of every pending task whose
// device request is invalid or asks for an unserved resource as its fit
// error, before any action runs. Volcano may skip such a task before a
// predicate sees it (an absurd request exceeds its queue's share), and the
// PodGroup's Unschedulable condition would then not say what is wrong; the
// predicates replace it with the per-node errors when they run.
func (p *plugin) explainInvalidRequests(ssn *framework.Session) {
	volcano.EachTask(ssn, vcapi.Pending, func(job *vcapi.JobInfo, task *vcapi.TaskInfo) {
		switch req := p.sess.requests[task.UID]; {
		case req == nil:
		case req.unserved != "":
			volcano.SetFitError(job, task, ReasonUnservedPrefix+req.unserved)
		case req.invalid != nil:
			volcano.SetFitError(job, task, ReasonInvalidRequest+req.invalid.Error())
		}
	})
}

func reasons(sts []*vcapi.Status) []string {
	out := make([]string, 0, len(sts))
	for _, s := range sts {
		out = append(out, s.Reason)
	}
	return out
}

// requestsKnownDevice reports whether a pod asks for any resource of a
// device type this project serves, whichever types are enabled.
func requestsKnownDevice(pod *v1.Pod) bool { return knownDeviceResource(pod) != "" }

// knownDeviceResource returns the first resource of a device type this
// project serves that the pod asks for, or "".
func knownDeviceResource(pod *v1.Pod) v1.ResourceName {
	check := func(c *v1.Container) v1.ResourceName {
		for name := range c.Resources.Limits {
			if isKnownDeviceResource(name) {
				return name
			}
		}
		for name := range c.Resources.Requests {
			if isKnownDeviceResource(name) {
				return name
			}
		}
		return ""
	}
	for i := range pod.Spec.Containers {
		if name := check(&pod.Spec.Containers[i]); name != "" {
			return name
		}
	}
	for i := range pod.Spec.InitContainers {
		if name := check(&pod.Spec.InitContainers[i]); name != "" {
			return name
		}
	}
	return ""
}

// isKnownDeviceResource reports whether name is a resource of the device
// types this project serves under their default names: GPU share and
// number, HAMi vGPU, and Ascend chips (huawei.com/Ascend*, npu-core).
func isKnownDeviceResource(name v1.ResourceName) bool {
	switch name {
	case gpushareproto.ResourceGPUMemory, gpushareproto.ResourceGPUNumber,
		vgpuproto.ResourceNumber, vgpuproto.ResourceMemory, vgpuproto.ResourceMemoryPercentage, vgpuproto.ResourceCores,
		mindclusterproto.ResourceNPUCore:
		return true
	}
	return strings.HasPrefix(string(name), ascendproto.ResourceDomain+"Ascend")
}
