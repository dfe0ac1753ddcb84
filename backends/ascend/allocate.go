package ascend

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// Allocate picks the pod's cards (the choice FilterNode and ScoreNode made),
// accounts them and returns the annotations recording them:
// hami.io/<commonWord>-devices-to-allocate and -devices-allocated (the
// cards), huawei.com/<commonWord> (runtime info), hami.io/vgpu-node,
// hami.io/vgpu-time, hami.io/bind-time, predicate-time and
// hami.io/bind-phase: allocating. It succeeds whenever FilterNode does. A
// pod without a request gets a nil reservation; a pod already accounted
// here is an error.
func (d *Devices) Allocate(pod *v1.Pod, policy string) (*device.Reservation, error) {
	var req podRequest
	if err := d.b.parse(pod, &req); err != nil {
		return nil, fmt.Errorf("allocate %s on node %s: invalid request: %w", d.b.name, d.node, err)
	}
	if len(req.ctrs) == 0 {
		return nil, nil
	}
	if err := cardledger.CheckNew(d.ledger, pod); err != nil {
		return nil, err
	}
	picks, work, failed := d.choose(&req, policy)
	if failed >= 0 {
		return nil, fmt.Errorf("allocate %s for pod %s/%s on node %s: %s", d.b.name, pod.Namespace, pod.Name, d.node,
			d.explain(&req, failed, work).Message())
	}
	h := &holding{uses: make([]use, len(picks))}
	for i, p := range picks {
		h.uses[i] = p.use
	}
	value := d.encode(h.uses, req.containers)
	cardledger.Hold(d.ledger, pod, value, h, d.apply)
	now := strconv.FormatInt(d.b.clock.Now().Unix(), 10)
	d.logAllocation(pod, "Allocated Ascend vNPUs", value)
	return &device.Reservation{Annotations: map[string]string{
		d.b.keys.ToAllocate:                value,
		d.b.keys.Allocated:                 value,
		d.b.keys.RuntimeInfo:               d.runtimeValue(h.uses),
		ascendproto.AnnotationAssignedNode: d.node,
		ascendproto.AnnotationAssignedTime: now,
		ascendproto.AnnotationBindTime:     now,
		ascendproto.AnnotationPredicate:    now,
		ascendproto.AnnotationBindPhase:    ascendproto.BindPhaseAllocating,
	}}, nil
}

// Release gives back what Allocate took. A nil reservation, or one without
// hami.io/<commonWord>-devices-allocated, is a no-op. A record that differs
// from what the pod holds, or a pod holding nothing here, is an error and
// the state is unchanged.
func (d *Devices) Release(pod *v1.Pod, r *device.Reservation) error {
	released, err := cardledger.Release(d.ledger, pod, r, d.apply)
	if released {
		d.logAllocation(pod, "Released Ascend vNPUs", r.Annotations[d.b.keys.Allocated])
	}
	return err
}
