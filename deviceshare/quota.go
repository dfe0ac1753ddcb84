package deviceshare

import (
	"errors"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/quotawatch"
	"github.com/vgpushare/vshare/deviceshare/volcano"
)

// Namespace quotas on shares (docs/quotas.md).
//
// A ResourceQuota hard limit "limits.<device resource>" (device.QuotaLimits)
// caps what the namespace's pods hold of the resource: cards, memory times
// cards, cores times cards. The count comes from what is allocated, never
// from pod specs: at session open the node state's accounted pods (bound pods
// with their allocation annotations, and this process's binds in flight),
// then every allocation of the session as it is made, so a scheduler that
// restarts counts again from the pods and the second pod of a session sees
// the first.
//
// The predicate refuses a node when the pod would take its namespace over
// a limit. What the pod would hold is known before a card is chosen when
// the backend can say (device.QueueRequester: cards, memory in MiB, cores,
// each times the cards): the check is then the same on every node and runs
// before the device fit. Memory given as a percentage of a card (or left to
// the card's whole memory) depends on the card: the check then runs per
// node, after the device fit, on the cards the allocation would pick on a
// copy of the node's devices. The allocation handler checks again with the
// cards actually picked and refuses the bind of anything that would go
// over, so no path around the predicate can pass a limit.

// ReasonQuotasUnknown is the reason of a pod asking for a quota-limited
// device while the ResourceQuotas are not listed yet.
const ReasonQuotasUnknown = "namespace quotas are not known yet: the scheduler has not listed ResourceQuotas (it needs list and watch on resourcequotas)"

// quotaState is the session's accounting of the namespace quotas on device
// resources. A nil *quotaState enforces nothing. Like the rest of the
// session, it is written only by the allocation event handlers, which never
// run concurrently with the predicates that read it.
type quotaState struct {
	// resources are the device resources quotas may limit (device.QuotaResources).
	resources []v1.ResourceName
	// limits are the enforced limits, by namespace.
	limits map[string][]device.QuotaLimit
	// used is what the namespace's pods hold, by namespace and resource.
	used map[string]map[string]int64
	// unknown is set while the ResourceQuotas are not listed: every pod
	// asking for a quota resource waits with it as the reason.
	unknown string
}

// openQuotas builds the session's quota accounting; nil when no
// ResourceQuota limits a device resource of the enabled backends.
func (p *plugin) openQuotas(ssn *framework.Session) *quotaState {
	s := p.sess
	resources := device.QuotaResources(s.backends)
	if len(resources) == 0 {
		return nil
	}
	src := p.st.quotas.Source(p.st.configsCtx, ssn.KubeClient())
	if src == nil {
		return nil
	}
	list, synced := src.ResourceQuotas()
	if !synced {
		return &quotaState{resources: resources, unknown: ReasonQuotasUnknown}
	}
	q := &quotaState{resources: resources, limits: map[string][]device.QuotaLimit{}}
	for _, rq := range list {
		limits, err := device.QuotaLimits(rq, resources)
		if errors.Is(err, device.ErrScopedQuota) {
			klog.V(4).InfoS("Namespace quota not enforced on devices", "plugin", PluginName, "quota", klog.KObj(rq), "reason", err)
			continue
		}
		if len(limits) > 0 {
			q.limits[rq.Namespace] = append(q.limits[rq.Namespace], limits...)
		}
	}
	if len(q.limits) == 0 {
		return nil
	}
	used := make(map[string]map[string]int64, len(q.limits))
	p.st.nodes.QuotaUsage(q.limits, func(ns string, held map[string]float64) { addHeld(used, ns, held, 1) })
	q.used = used
	volcano.EachTask(ssn, vcapi.Pending, func(_ *vcapi.JobInfo, task *vcapi.TaskInfo) {
		if r := s.requests[task.UID]; r != nil && q.limits[task.Namespace] != nil {
			// r may be shared by the tasks of its key (openRequest); the
			// ask is this pod's own.
			own := *r
			own.quota = q.ask(s, task.Pod, r)
			s.requests[task.UID] = &own
		}
	})
	return q
}

func addHeld(used map[string]map[string]int64, ns string, held map[string]float64, sign int64) {
	if len(held) == 0 {
		return
	}
	u := used[ns]
	if u == nil {
		u = make(map[string]int64, len(held))
		used[ns] = u
	}
	for k, v := range held {
		u[k] += sign * int64(math.Round(v))
	}
}

// quotaAsk is what a pending pod would hold of the quota resources.
type quotaAsk struct {
	// amounts by resource name, as far as they are known before a card is
	// chosen.
	amounts map[string]float64
	// perNode is set when a limited resource's amount depends on the
	// cards chosen (memory as a percentage of a card).
	perNode bool
	// none is set when the pod asks for no resource its namespace limits.
	none bool
}

// ask computes what the pod would hold, before any card is chosen.
func (q *quotaState) ask(s *sessionState, pod *v1.Pod, req *taskRequest) *quotaAsk {
	a := &quotaAsk{amounts: map[string]float64{}}
	limited := false
	for _, i := range req.backends {
		if _, ok := s.backends[i].(device.QuotaNamer); !ok {
			continue
		}
		limited = true
		if qr, ok := s.backends[i].(device.QueueRequester); ok {
			for k, v := range qr.QueueRequest(pod) {
				a.amounts[k] += v
			}
		}
	}
	if !limited {
		return &quotaAsk{none: true}
	}
	for _, l := range q.limits[pod.Namespace] {
		if _, known := a.amounts[string(l.Resource)]; !known {
			a.perNode = true
		}
	}
	return a
}

// askOf returns the task's ask; nil when its namespace has no limits or it
// asks for no quota resource.
func (q *quotaState) askOf(s *sessionState, task *vcapi.TaskInfo, req *taskRequest) *quotaAsk {
	if q == nil || q.limits[task.Namespace] == nil {
		return nil
	}
	a := req.quota
	if a == nil {
		a = q.ask(s, task.Pod, req)
	}
	if a.none {
		return nil
	}
	return a
}

// over returns the first limit of the namespace that holding amounts more
// would pass, with the namespace's use and the amount asked.
func (q *quotaState) over(ns string, amounts map[string]float64) (device.QuotaLimit, int64, int64, bool) {
	for _, l := range q.limits[ns] {
		asked := int64(math.Round(amounts[string(l.Resource)]))
		used := q.used[ns][string(l.Resource)]
		if !l.Fits(used, asked) {
			return l, used, asked, true
		}
	}
	return device.QuotaLimit{}, 0, 0, false
}

// quotaPrecheck is the predicate's quota check that does not depend on the
// node: every node is refused alike when the namespace's quotas are not
// known or the pod's ask, known before a card is chosen, does not fit.
// Quota refusals are unresolvable: evicting pods frees no quota until they
// have exited, and then the pod is placed without evicting anyone.
func (p *plugin) quotaPrecheck(task *vcapi.TaskInfo, node *vcapi.NodeInfo, req *taskRequest) error {
	q := p.sess.quotas
	if q == nil {
		return nil
	}
	if q.unknown != "" {
		if asksQuotaNamer(p.sess, req) {
			p.st.metrics.FilterFailed("quota", "quotas unknown")
			return p.sess.fitError(task, node, device.UnschedulableAndUnresolvable, q.unknown)
		}
		return nil
	}
	a := q.askOf(p.sess, task, req)
	if a == nil || a.perNode {
		return nil
	}
	if l, used, asked, over := q.over(task.Namespace, a.amounts); over {
		p.st.metrics.FilterFailed("quota", "namespace quota exceeded")
		return quotaFitError(task, node, l.Exceeded(used, asked))
	}
	return nil
}

// asksQuotaNamer reports whether the request asks a backend whose resources
// quotas may limit.
func asksQuotaNamer(s *sessionState, req *taskRequest) bool {
	for _, i := range req.backends {
		if _, ok := s.backends[i].(device.QuotaNamer); ok {
			return true
		}
	}
	return false
}

// quotaOnNode is the per-node quota check of a pod whose ask depends on the
// cards (see quotaAsk.perNode), on a node its devices fit: the cards the
// allocation would pick on a copy of the node's devices decide.
func (p *plugin) quotaOnNode(task *vcapi.TaskInfo, node *vcapi.NodeInfo, req *taskRequest, sn *sessionNode) error {
	s := p.sess
	a := s.quotas.askOf(s, task, req)
	if a == nil || !a.perNode {
		return nil
	}
	held := map[string]float64{}
	for _, i := range req.backends {
		d := sn.devices[i]
		if d == nil || d.invErr != nil {
			continue
		}
		c := d.now()
		if c == d.read() {
			c = c.DeepCopy()
		}
		r, err := c.Allocate(task.Pod, s.args.SchedulePolicy)
		if err != nil || r == nil {
			// The device fit passed; the allocation handler checks the
			// cards it picks.
			continue
		}
		for k, v := range c.AddQueueResource(device.ApplyReservation(task.Pod, r)) {
			held[k] += v
		}
	}
	if l, used, asked, over := s.quotas.over(task.Namespace, held); over {
		p.st.metrics.FilterFailed("quota", "namespace quota exceeded")
		return quotaFitError(task, node, l.Exceeded(used, asked))
	}
	return nil
}

// quotaFitError builds the fit error of a quota refusal. Its status is
// not shared through statusCache: the reason carries amounts that change.
func quotaFitError(task *vcapi.TaskInfo, node *vcapi.NodeInfo, reason string) error {
	return vcapi.NewFitErrWithStatus(task, node, &vcapi.Status{Code: device.UnschedulableAndUnresolvable, Reason: reason, Plugin: PluginName})
}

// chargeQuota counts an allocation against its namespace's quotas. An
// allocation that would pass a limit (which the predicate prevents; this
// catches any path around it) has its bind refused: it stays counted until
// the session discards it or ends, which errs on the safe side.
func (p *plugin) chargeQuota(task *vcapi.TaskInfo, req *taskRequest, alloc *sessionAlloc) {
	q := p.sess.quotas
	if q == nil {
		return
	}
	if q.unknown != "" {
		if asksQuotaNamer(p.sess, req) && !alloc.pipelined {
			p.st.binder.Decisions.Refuse(task.Pod.UID, errors.New(q.unknown))
		}
		return
	}
	if q.limits[task.Namespace] == nil {
		return
	}
	if l, used, asked, over := q.over(task.Namespace, alloc.held); over {
		reason := l.Exceeded(used, asked)
		klog.ErrorS(nil, "Allocation would pass a namespace quota; its bind is refused", "plugin", PluginName,
			"pod", klog.KObj(task.Pod), "node", task.NodeName, "reason", reason)
		if !alloc.pipelined {
			p.st.binder.Decisions.Refuse(task.Pod.UID, errors.New(reason))
		}
	}
	addHeld(q.used, task.Namespace, alloc.held, 1)
}

// counts reports whether chargeQuota counts what pods of the namespace
// hold (a quota limits a device resource there); false for a nil state.
func (q *quotaState) counts(ns string) bool {
	return q != nil && q.unknown == "" && q.limits[ns] != nil
}

// unchargeQuota gives back what chargeQuota counted for a discarded
// allocation (a gang that did not become ready, a discarded statement).
func (p *plugin) unchargeQuota(task *vcapi.TaskInfo, alloc *sessionAlloc) {
	if q := p.sess.quotas; q.counts(task.Namespace) {
		addHeld(q.used, task.Namespace, alloc.held, -1)
	}
}

// samples are the session's enforced limits and their namespaces' usage,
// for the quota metrics (quotawatch.Watch.Record).
func (q *quotaState) samples() []quotawatch.Sample {
	if q == nil {
		return nil
	}
	var out []quotawatch.Sample
	for ns, limits := range q.limits {
		for _, l := range limits {
			out = append(out, quotawatch.Sample{Namespace: ns, Quota: l.Quota, Resource: l.Name(),
				Used: q.used[ns][string(l.Resource)], Hard: l.Hard})
		}
	}
	return out
}
