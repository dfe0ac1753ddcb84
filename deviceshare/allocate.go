package deviceshare

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/bind"
	"github.com/vgpushare/vshare/deviceshare/volcano"
	"github.com/vgpushare/vshare/internal/allocsig"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

// onAllocate is the allocation event handler (allocate, pipeline and a
// discarded eviction's undo all raise it). It picks the cards on the
// session's copy of the node's devices and, for a task to be bound, records
// the choice once (bind.Decisions): the binder sends its annotations on the
// v1.Binding and the node state accounts it until the informer shows it. A
// pipelined task (a preemptor waiting for its victims) only reserves its
// cards in the session view. No API call happens here, and the task's pod
// is left alone: Volcano v1.10 still feeds session pods to its built-in
// device objects (NodeInfo.Others), whose vGPU SubResource crashes on
// allocation annotations it did not add itself.
func (p *plugin) onAllocate(ev *framework.Event) {
	s := p.sess
	task := ev.Task
	// Volcano has changed the node's idle resources, which the fragment
	// policy reads, whatever the task asks for.
	s.touch(task.NodeName)
	if e, ok := s.evicted[task.UID]; ok {
		// An eviction was discarded: the pod keeps the cards it had.
		delete(s.evicted, task.UID)
		for _, d := range e.parts {
			if err := d.restore(e.pod); err != nil {
				klog.ErrorS(err, "Restoring an evicted pod's devices failed", "pod", klog.KObj(e.pod))
			}
		}
		s.queues.Add(e.queue, e.held, 1)
		p.preemptionUndone()
		return
	}
	req := s.requestOf(task)
	if req == nil || req.invalid != nil || req.unserved != "" {
		return
	}
	pipelined := volcano.Pipelined(task)
	if s.preempting != nil && s.preempting.task == task.UID {
		s.preempting = nil
	}
	sn := s.nodes[task.NodeName]
	if sn == nil {
		p.refuse(task, pipelined, fmt.Errorf("node %s has no device state", task.NodeName))
		return
	}
	alloc := &sessionAlloc{node: task.NodeName, original: task.Pod, pipelined: pipelined}
	// merged are the annotations of every backend's reservation. With one
	// backend they are its reservation's own map (the usual case; a second
	// map per allocation was 3 MB of a 10,000-pod session): the backend
	// hands it over, and Release reads only its own keys from it.
	var merged map[string]string
	var lockKeys, agentLocks []string
	for j, i := range req.backends {
		d := sn.devices[i]
		if d == nil || d.invErr != nil {
			p.rollback(alloc)
			p.refuse(task, pipelined, fmt.Errorf("node %s has no usable %s devices", task.NodeName, s.backends[i].Name()))
			return
		}
		var host device.Host
		if s.args.SchedulePolicy == device.PolicyFragment && p.ssn != nil {
			host = hostOf(s.args.SchedulePolicy, volcano.NodeIdle(p.ssn, task.NodeName), task.Resreq)
		}
		r, err := allocateOn(d, task.Pod, req.prep(j), s.args.SchedulePolicy, host, pipelined)
		if err != nil {
			p.rollback(alloc)
			p.st.metrics.Allocated(s.backends[i].Name(), "error")
			klog.ErrorS(err, "Device allocation failed after the node passed the predicate; the task keeps no cards",
				"pod", klog.KObj(task.Pod), "node", task.NodeName, "device", s.backends[i].Name(), "pipelined", pipelined)
			p.refuse(task, pipelined, fmt.Errorf("allocate %s devices on node %s: %w", s.backends[i].Name(), task.NodeName, err))
			return
		}
		alloc.parts = append(alloc.parts, allocPart{devices: d, reservation: r})
		lockKeys = appendLocks(lockKeys, s.args.NodeLockEnable, s.backends[i], r)
		agentLocks = append(agentLocks, r.NodeLocks...)
		if len(req.backends) == 1 && r.Annotations != nil {
			merged = r.Annotations
		} else {
			if merged == nil {
				merged = map[string]string{}
			}
			for k, v := range r.Annotations {
				merged[k] = v
			}
		}
		p.st.metrics.Allocated(s.backends[i].Name(), "success")
	}
	var signed []string
	for _, i := range req.backends {
		if sb, ok := s.backends[i].(device.Signed); ok {
			signed = append(signed, sb.SignedAnnotations()...)
		}
	}
	// The node locks the bind will take (none for a pipelined task, whose
	// allocation a later session replaces), signed with the allocation so
	// the node agent knows whether to release one (nodelock.AnnotationTaken).
	if merged == nil {
		merged = map[string]string{}
	}
	if pipelined {
		merged[nodelock.AnnotationTaken] = ""
	} else {
		merged[nodelock.AnnotationTaken] = nodelock.FormatTaken(lockKeys)
	}
	if len(signed) > 0 {
		signed = append(signed, nodelock.AnnotationTaken)
	}
	if sig := p.st.signature(task.Pod, task.NodeName, merged, signed); sig != "" {
		merged[allocsig.Annotation] = sig
	}
	alloc.annotations = merged
	alloc.queue = p.queueOf(task)
	if s.queues.Tracked(alloc.queue) || s.quotas.counts(task.Namespace) {
		alloc.held = s.held(sn, req.backends, alloc.annotated())
	}
	s.queues.Add(alloc.queue, alloc.held, 1)
	s.allocs[task.UID] = alloc
	if pipelined {
		// A pipelined task is bound in a later session, if at all; its
		// reservation lives in this session's view only (Volcano keeps no
		// pipelined state across sessions either), so the node state assumes
		// nothing and no node lock is due. The binder's note only records
		// the choice: a later session's allocation replaces it.
		p.st.binder.Decisions.Record(task.Pod.UID, bind.Decision{Node: task.NodeName, Annotations: merged})
		p.chargeQuota(task, req, alloc)
		klog.V(4).InfoS("Reserved devices for a pipelined task", "plugin", PluginName, "pod", klog.KObj(task.Pod),
			"node", task.NodeName, "annotations", merged)
		return
	}
	sn.inSession++
	var locks *bind.NodeLocks
	if len(lockKeys) > 0 {
		locks = &bind.NodeLocks{Keys: lockKeys, Agent: agentLocks, TTL: s.args.NodeLockExpiry}
	}
	inv := make([]bind.InventoryStamp, len(alloc.parts))
	for j, part := range alloc.parts {
		inv[j] = bind.InventoryStamp{Backend: s.backends[req.backends[j]].Name(), Gen: part.devices.gen}
	}
	p.st.binder.Decisions.Record(task.Pod.UID, bind.Decision{Node: task.NodeName, Annotations: merged, Locks: locks,
		Ordered: s.orderedKeys(sn, req.backends, alloc.annotated()), Inventories: inv, Assumed: true})
	// After the decision is recorded: a refusal must outlive it.
	p.chargeQuota(task, req, alloc)
	klog.V(4).InfoS("Allocated devices", "plugin", PluginName, "pod", klog.KObj(task.Pod), "node", task.NodeName,
		"annotations", merged)
}

// allocateOn picks the pod's cards on the session's view. A pod that will
// be bound now must not get cards terminating pods still hold: when some
// are terminating on the node, the cards are chosen on now() and the
// choice is then accounted in the view.
func allocateOn(d *sessionDevices, pod *v1.Pod, prep device.Prepared, policy string, host device.Host, pipelined bool) (*device.Reservation, error) {
	if pipelined || len(d.releasing) == 0 {
		return allocateWith(d.write(), pod, prep, policy, host)
	}
	r, err := allocateWith(d.now(), pod, prep, policy, host)
	if err != nil || r == nil {
		return r, err
	}
	if err := d.write().AddResource(device.ApplyReservation(pod, r)); err != nil {
		return nil, fmt.Errorf("account the allocation in the session view: %w", err)
	}
	return r, nil
}

// refuse makes the binder refuse the task's bind; a pipelined task is not
// bound this session, so there is nothing to refuse.
func (p *plugin) refuse(task *vcapi.TaskInfo, pipelined bool, err error) {
	if !pipelined {
		p.st.binder.Decisions.Refuse(task.Pod.UID, err)
	}
}

// onDeallocate is the deallocation event handler: a discarded allocation
// (gang not ready, statement discarded) or an eviction.
func (p *plugin) onDeallocate(ev *framework.Event) {
	s := p.sess
	task := ev.Task
	s.touch(task.NodeName)
	if alloc, ok := s.allocs[task.UID]; ok {
		delete(s.allocs, task.UID)
		p.rollback(alloc)
		s.queues.Add(alloc.queue, alloc.held, -1)
		p.unchargeQuota(task, alloc)
		p.st.binder.Decisions.Forget(task.Pod.UID)
		if !alloc.pipelined {
			if sn := s.nodes[alloc.node]; sn != nil {
				sn.inSession--
			}
		}
		klog.V(4).InfoS("Released devices of a discarded allocation", "plugin", PluginName,
			"pod", klog.KObj(task.Pod), "node", alloc.node, "pipelined", alloc.pipelined)
		return
	}
	// An eviction: the pod is terminating; its cards are future capacity
	// for this session's preemptors (see sessionDevices).
	sn := s.nodes[task.NodeName]
	if sn == nil {
		return
	}
	pod := s.effectivePod(task.Pod)
	e := &evictedPod{pod: pod, queue: p.queueOf(task)}
	e.held = s.held(sn, allBackends(len(s.backends)), pod)
	for i, b := range s.backends {
		d := sn.devices[i]
		if d == nil || d.invErr != nil || !b.HasDeviceRequest(pod) {
			continue
		}
		if err := d.release(pod); err != nil {
			klog.ErrorS(err, "Releasing an evicted pod's devices failed", "pod", klog.KObj(pod), "node", task.NodeName)
			continue
		}
		e.parts = append(e.parts, d)
	}
	s.queues.Add(e.queue, e.held, -1)
	s.evicted[task.UID] = e
	p.victimEvicted(task.UID)
}

// rollback releases what an allocation took, in reverse order.
func (p *plugin) rollback(alloc *sessionAlloc) {
	pod := alloc.annotated()
	for i := len(alloc.parts) - 1; i >= 0; i-- {
		part := alloc.parts[i]
		if err := part.devices.write().Release(pod, part.reservation); err != nil {
			klog.ErrorS(err, "Releasing devices failed", "pod", klog.KObj(pod))
		}
	}
	alloc.parts = nil
}

// appendLocks adds the node locks a bind takes for one backend's part of
// an allocation: those the reservation names (its node's agent expects
// them whatever deviceshare.NodeLockEnable says, and releases only those),
// else the backend's lock when NodeLockEnable is set; each key once.
func appendLocks(keys []string, enabled bool, b device.Backend, r *device.Reservation) []string {
	add := r.NodeLocks
	if add == nil && enabled {
		if l, ok := b.(device.NodeLocker); ok && l.LockName() != "" {
			add = []string{l.LockName()}
		}
	}
	for _, k := range add {
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// orderedKeys are the bind's agent turns for the pod allocated on sn by
// backends[idx...]: the ordered device types, each in the pod's agent
// classes when the node's devices have them (device.AgentClasser).
func (s *sessionState) orderedKeys(sn *sessionNode, idx []int, annotated *v1.Pod) []bind.OrderedKey {
	keys := bind.OrderedKeys(s.backends, idx)
	for j, k := range keys {
		if c := classesOf(sn, s.backends, k.Backend(), annotated); c != nil {
			keys[j] = k.WithClasses(c)
		}
	}
	return keys
}

// agentClasses is a bind.ClassesFunc over the session's nodes.
func (s *sessionState) agentClasses(node, backend string, pod *v1.Pod) []string {
	sn := s.nodes[node]
	if sn == nil {
		return nil
	}
	return classesOf(sn, s.backends, backend, pod)
}

// classesOf reads the pod's agent classes from the node's devices of the
// named backend, nil when they have none.
func classesOf(sn *sessionNode, backends []device.Backend, backend string, pod *v1.Pod) []string {
	for i, b := range backends {
		if b.Name() != backend || sn.devices[i] == nil || sn.devices[i].base == nil {
			continue
		}
		if c, ok := sn.devices[i].read().(device.AgentClasser); ok {
			return c.AgentClasses(pod)
		}
	}
	return nil
}
