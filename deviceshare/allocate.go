package deviceshare

import (
	"fmt"

	"k8s.io/klog/v2"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/deviceshare/api"
)

// onAllocate is the allocation event handler (allocate, pipeline and a
// discarded eviction's undo all raise it). It picks the cards on the
// session's copy of the node's devices, records the choice in the ledger as
// an assumption, and hands the allocation annotations to the binder, which
// sends them on the v1.Binding. No API call happens here, and the task's
// pod is left alone: Volcano v1.10 still feeds session pods to its built-in
// device objects (NodeInfo.Others), whose vGPU SubResource crashes on
// allocation annotations it did not add itself.
func (p *plugin) onAllocate(ev *framework.Event) {
	s := p.sess
	task := ev.Task
	if e, ok := s.evicted[task.UID]; ok {
		// An eviction was discarded: the pod keeps the cards it had.
		delete(s.evicted, task.UID)
		for _, d := range e.parts {
			if err := d.write().AddResource(e.pod); err != nil {
				klog.ErrorS(err, "Restoring an evicted pod's devices failed", "pod", klog.KObj(e.pod))
			}
		}
		return
	}
	req := s.requestOf(task)
	if req == nil || req.invalid != nil || req.unserved != "" {
		return
	}
	sn := s.nodes[task.NodeName]
	if sn == nil {
		p.st.binder.refuse(task.UID, fmt.Errorf("node %s has no device state", task.NodeName))
		return
	}
	alloc := &sessionAlloc{node: task.NodeName, original: task.Pod}
	merged := &api.Reservation{Annotations: map[string]string{}}
	for _, i := range req.backends {
		d := sn.devices[i]
		if d == nil || d.invErr != nil {
			p.rollback(alloc)
			p.st.binder.refuse(task.UID, fmt.Errorf("node %s has no usable %s devices", task.NodeName, s.backends[i].Name()))
			return
		}
		r, err := d.write().Allocate(task.Pod, s.args.SchedulePolicy)
		if err != nil {
			p.rollback(alloc)
			p.st.metrics.allocated(s.backends[i].Name(), "error")
			klog.ErrorS(err, "Device allocation failed after the node passed the predicate; the bind will be refused",
				"pod", klog.KObj(task.Pod), "node", task.NodeName, "device", s.backends[i].Name())
			p.st.binder.refuse(task.UID, fmt.Errorf("allocate %s devices on node %s: %w", s.backends[i].Name(), task.NodeName, err))
			return
		}
		alloc.parts = append(alloc.parts, allocPart{devices: d, reservation: r})
		for k, v := range r.Annotations {
			merged.Annotations[k] = v
		}
		p.st.metrics.allocated(s.backends[i].Name(), "success")
	}
	alloc.annotated = api.ApplyReservation(task.Pod, merged)
	s.allocs[task.UID] = alloc
	sn.inSession++
	var locks []string
	if s.args.NodeLockEnable {
		locks = lockNames(s.backends, req.backends)
	}
	p.st.binder.annotate(task.UID, task.NodeName, merged.Annotations, locks, orderedKeys(s.backends, req.backends))
	p.st.ledger.Assume(task.Pod.UID, task.NodeName, merged.Annotations)
	klog.V(4).InfoS("Allocated devices", "plugin", PluginName, "pod", klog.KObj(task.Pod), "node", task.NodeName,
		"annotations", merged.Annotations)
}

// onDeallocate is the deallocation event handler: a discarded allocation
// (gang not ready, statement discarded) or an eviction.
func (p *plugin) onDeallocate(ev *framework.Event) {
	s := p.sess
	task := ev.Task
	if alloc, ok := s.allocs[task.UID]; ok {
		delete(s.allocs, task.UID)
		p.rollback(alloc)
		p.st.ledger.Forget(task.Pod.UID)
		p.st.binder.forget(task.UID)
		if sn := s.nodes[alloc.node]; sn != nil {
			sn.inSession--
		}
		klog.V(4).InfoS("Released devices of a discarded allocation", "plugin", PluginName,
			"pod", klog.KObj(task.Pod), "node", alloc.node)
		return
	}
	// An eviction: the pod's cards are free for this session's preemptors.
	sn := s.nodes[task.NodeName]
	if sn == nil {
		return
	}
	pod := s.effectivePod(task.Pod)
	e := &evictedPod{pod: pod}
	for i, b := range s.backends {
		d := sn.devices[i]
		if d == nil || d.invErr != nil || !b.HasDeviceRequest(pod) {
			continue
		}
		if err := d.write().SubResource(pod); err != nil {
			klog.ErrorS(err, "Releasing an evicted pod's devices failed", "pod", klog.KObj(pod), "node", task.NodeName)
			continue
		}
		e.parts = append(e.parts, d)
	}
	s.evicted[task.UID] = e
}

// rollback releases what an allocation took, in reverse order.
func (p *plugin) rollback(alloc *sessionAlloc) {
	pod := alloc.annotated
	if pod == nil {
		pod = alloc.original
	}
	for i := len(alloc.parts) - 1; i >= 0; i-- {
		part := alloc.parts[i]
		if err := part.devices.write().Release(pod, part.reservation); err != nil {
			klog.ErrorS(err, "Releasing devices failed", "pod", klog.KObj(pod))
		}
	}
	alloc.parts = nil
}

func lockNames(backends []api.Backend, idx []int) []string {
	var out []string
	for _, i := range idx {
		if l, ok := backends[i].(api.NodeLocker); ok && l.LockName() != "" {
			out = append(out, l.LockName())
		}
	}
	return out
}
