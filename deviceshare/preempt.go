package deviceshare

import (
	"sort"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/evictplan"
)

// Device-aware preemption and reclaim on Volcano v1.10.
//
// Volcano's preempt and reclaim actions know nodes, not cards: they pick
// victims among a node's pods with the plugins' PreemptableFn/ReclaimableFn,
// evict them in victim order until the node's FutureIdle covers the
// preemptor's request (and, for preempt, until ssn.Allocatable agrees), and
// pipeline the preemptor. The plugin steers each step:
//
//   - PreemptableFn and ReclaimableFn keep, of the candidates, the fewest and
//     lowest-priority pods whose cards the preemptor needs: a sharer of a
//     card the preemptor cannot use is never a victim. Candidates that hold
//     no card of the preemptor's device types are kept only when the node's
//     CPU, memory or other resources need them too.
//   - AllocatableFn answers false, while such victims remain, until the
//     preemptor fits the node's cards, so the preempt action's loop evicts
//     exactly the chosen victims rather than stopping when a node-level sum
//     (summed over cards) says enough.
//   - Evictions move victims' allocations out of the session view (they are
//     terminating) and the pipelined preemptor reserves them there; a
//     discarded statement puts both back. The node state is not touched: it
//     learns about evictions from the pods themselves, next session.

// preemptSlot is the preemption in progress: the preemptor, the node whose
// victims the plugin chose, and those of the victims not evicted yet.
type preemptSlot struct {
	task      vcapi.TaskID
	node      string
	remaining map[vcapi.TaskID]bool
}

// prePredicate is the PrePredicateFn. Both actions call it before they look
// at nodes for a preemptor, which ends any earlier victim loop.
func (p *plugin) prePredicate(*vcapi.TaskInfo) error {
	p.sess.preempting = nil
	return nil
}

// preemptable is the PreemptableFn.
func (p *plugin) preemptable(preemptor *vcapi.TaskInfo, preemptees []*vcapi.TaskInfo) ([]*vcapi.TaskInfo, int) {
	return p.chooseVictims(preemptor, preemptees, "preempt")
}

// reclaimable is the ReclaimableFn.
func (p *plugin) reclaimable(reclaimer *vcapi.TaskInfo, reclaimees []*vcapi.TaskInfo) ([]*vcapi.TaskInfo, int) {
	return p.chooseVictims(reclaimer, reclaimees, "reclaim")
}

// Votes of a victim function: abstain leaves the choice to other plugins.
const (
	abstain = 0
	decide  = 1
)

// chooseVictims returns the victims among candidates (all on one node) the
// preemptor's device request needs. It abstains for a preemptor without
// devices or one whose devices already fit (then the node's other
// resources are what preemption is for).
func (p *plugin) chooseVictims(preemptor *vcapi.TaskInfo, candidates []*vcapi.TaskInfo, action string) ([]*vcapi.TaskInfo, int) {
	s := p.sess
	s.preempting = nil
	req := s.requestOf(preemptor)
	if req == nil || req.invalid != nil || req.unserved != "" || len(candidates) == 0 {
		return nil, abstain
	}
	nodeName := candidates[0].NodeName
	sn := s.nodes[nodeName]
	pl := s.newPlanner(preemptor.Pod, req, sn)
	if pl == nil {
		return nil, abstain
	}
	if pl.Fits(nil) {
		return nil, abstain
	}
	var holders, others []*vcapi.TaskInfo
	for _, c := range candidates {
		if action == "reclaim" && !p.reclaimableFrom(p.queueOf(c), c) {
			continue
		}
		if c.Pod != nil && pl.Holds(s.effectivePod(c.Pod)) {
			holders = append(holders, c)
		} else {
			others = append(others, c)
		}
	}
	p.sortVictims(holders)
	chosen := pl.Search(holders, s.effectivePod, p.samePriority)
	if chosen == nil {
		klog.V(4).InfoS("No eviction frees enough devices for the preemptor", "plugin", PluginName, "action", action,
			"preemptor", klog.KRef(preemptor.Namespace, preemptor.Name), "node", nodeName, "candidates", len(candidates))
		return nil, decide
	}
	slot := &preemptSlot{task: preemptor.UID, node: nodeName, remaining: make(map[vcapi.TaskID]bool, len(chosen))}
	for _, v := range chosen {
		slot.remaining[v.UID] = true
	}
	s.preempting = slot
	victims := append(chosen, p.nodeLevelVictims(preemptor, nodeName, chosen, others)...)
	if klog.V(4).Enabled() {
		names := make([]string, 0, len(victims))
		for _, v := range victims {
			names = append(names, v.Namespace+"/"+v.Name)
		}
		klog.V(4).InfoS("Chose device victims", "plugin", PluginName, "action", action,
			"preemptor", klog.KRef(preemptor.Namespace, preemptor.Name), "node", nodeName, "victims", names)
	}
	return victims, decide
}

// nodeLevelVictims adds, lowest priority first, candidates holding none of
// the preemptor's cards while the node's future idle resources plus the
// chosen victims' requests do not cover the preemptor's request.
func (p *plugin) nodeLevelVictims(preemptor *vcapi.TaskInfo, nodeName string, chosen, others []*vcapi.TaskInfo) []*vcapi.TaskInfo {
	node := p.ssn.Nodes[nodeName]
	if node == nil || preemptor.InitResreq == nil {
		return nil
	}
	free := node.FutureIdle()
	for _, v := range chosen {
		free.Add(v.Resreq)
	}
	p.sortVictims(others)
	var out []*vcapi.TaskInfo
	for _, o := range others {
		if preemptor.InitResreq.LessEqual(free, vcapi.Zero) {
			break
		}
		out = append(out, o)
		free.Add(o.Resreq)
	}
	return out
}

// sortVictims orders tasks as the plugin prefers to evict them: lower job
// priority, then lower pod priority, then the most recently created.
func (p *plugin) sortVictims(tasks []*vcapi.TaskInfo) {
	jobPriority := func(t *vcapi.TaskInfo) int32 {
		if j := p.ssn.Jobs[t.Job]; j != nil {
			return j.Priority
		}
		return 0
	}
	sort.SliceStable(tasks, func(i, j int) bool {
		a, b := tasks[i], tasks[j]
		if pa, pb := jobPriority(a), jobPriority(b); pa != pb {
			return pa < pb
		}
		if a.Priority != b.Priority {
			return a.Priority < b.Priority
		}
		if ca, cb := created(a), created(b); !ca.Equal(&cb) {
			return cb.Before(&ca)
		}
		return a.UID < b.UID
	})
}

// samePriority reports whether two tasks have the same job and pod
// priority.
func (p *plugin) samePriority(a, b *vcapi.TaskInfo) bool {
	ja, jb := p.ssn.Jobs[a.Job], p.ssn.Jobs[b.Job]
	if (ja == nil) != (jb == nil) || (ja != nil && ja.Priority != jb.Priority) {
		return false
	}
	return a.Priority == b.Priority
}

// preemptionAllows is the preemption half of the AllocatableFn: during a
// victim loop the plugin chose victims for, the preemptor is allocatable
// only once its devices fit the node (or no chosen victim is left).
func (p *plugin) preemptionAllows(task *vcapi.TaskInfo) bool {
	s := p.sess
	slot := s.preempting
	if slot == nil || slot.task != task.UID || len(slot.remaining) == 0 {
		return true
	}
	req := s.requestOf(task)
	if req == nil {
		return true
	}
	if pl := s.newPlanner(task.Pod, req, s.nodes[slot.node]); pl != nil && !pl.Fits(nil) {
		return false
	}
	s.preempting = nil
	return true
}

// victimEvicted notes an eviction for the preemption in progress.
func (p *plugin) victimEvicted(uid vcapi.TaskID) {
	if slot := p.sess.preempting; slot != nil {
		delete(slot.remaining, uid)
	}
}

// preemptionUndone ends the preemption in progress: its statement is being
// discarded.
func (p *plugin) preemptionUndone() { p.sess.preempting = nil }

// newPlanner returns a planner over the node's session view, nil when the
// node lacks usable devices of a type the pod asks for.
func (s *sessionState) newPlanner(pod *v1.Pod, req *taskRequest, sn *sessionNode) *evictplan.Planner {
	if sn == nil || pod == nil {
		return nil
	}
	views := make([]device.Devices, 0, len(req.backends))
	for _, i := range req.backends {
		d := sn.devices[i]
		if d == nil || d.invErr != nil {
			return nil
		}
		views = append(views, d.read())
	}
	return evictplan.New(pod, s.args.SchedulePolicy, views)
}

// evictableFor reports whether Volcano's preempt or reclaim action could
// evict the placed task for the pending one: a running, preemptable pod of
// a lower-priority job of the same queue, a lower-priority pod of the same
// job, or a pod of another queue that may be reclaimed.
func (p *plugin) evictableFor(pending, placed *vcapi.TaskInfo) bool {
	if !vcapi.PreemptableStatus(placed.Status) || !placed.Preemptable || placed.UID == pending.UID {
		return false
	}
	pj, vj := p.ssn.Jobs[pending.Job], p.ssn.Jobs[placed.Job]
	switch {
	case pj == nil || vj == nil:
		return true
	case pj.UID == vj.UID:
		return placed.Priority < pending.Priority
	case pj.Queue != vj.Queue:
		q := p.ssn.Queues[vj.Queue]
		return (q == nil || q.Reclaimable()) && p.reclaimableFrom(vj.Queue, placed)
	default:
		return vj.Priority < pj.Priority
	}
}

// reclaimableFrom reports whether the placed task of another queue may be
// reclaimed as far as device resources go: its queue sets no deserved
// amount on them, or holds more than deserved of one the task holds.
func (p *plugin) reclaimableFrom(queue vcapi.QueueID, placed *vcapi.TaskInfo) bool {
	q := p.sess.queues
	if q == nil || len(q.Deserved[queue]) == 0 || placed.Pod == nil {
		return true
	}
	sn := p.sess.nodes[placed.NodeName]
	if sn == nil {
		return true
	}
	return q.OverDeserved(queue, p.sess.held(sn, allBackends(len(p.sess.backends)), p.sess.effectivePod(placed.Pod)))
}

// evictionCouldHelp reports whether the pod would fit the node's cards if
// every pod Volcano could evict for it were gone.
func (p *plugin) evictionCouldHelp(task *vcapi.TaskInfo, node *vcapi.NodeInfo, pl *evictplan.Planner) bool {
	var gone []*v1.Pod
	seen := map[types.UID]bool{}
	for _, placed := range node.Tasks {
		if placed.Pod == nil || seen[placed.Pod.UID] || !p.evictableFor(task, placed) {
			continue
		}
		pod := p.sess.effectivePod(placed.Pod)
		if !pl.Holds(pod) {
			continue
		}
		seen[pod.UID] = true
		gone = append(gone, pod)
	}
	return len(gone) > 0 && pl.Fits(gone)
}

// created is the task's pod creation time.
func created(t *vcapi.TaskInfo) metav1.Time {
	if t.Pod == nil {
		return metav1.Time{}
	}
	return t.Pod.CreationTimestamp
}
