package vgpu

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Allocate picks the pod's cards (the choice FilterNode and ScoreNode made),
// accounts them and returns the annotations recording them:
// volcano.sh/vgpu-ids-new and volcano.sh/devices-to-allocate (the cards),
// volcano.sh/vgpu-node, volcano.sh/vgpu-time, volcano.sh/bind-phase
// (allocating) and volcano.sh/bind-time; on a HAMi-registered node the
// hami.io/* ones HAMi's plugin reads instead of the volcano.sh ones nothing
// there reads, and the node lock it releases (hami.go). It succeeds
// whenever FilterNode does. A pod without a request gets a nil
// reservation; a pod already accounted here is an error.
func (d *Devices) Allocate(pod *v1.Pod, policy string) (*device.Reservation, error) {
	p, _ := d.b.Prepare(pod, policy)
	return d.AllocatePrepared(pod, p, device.Host{})
}

// AllocatePrepared implements device.Fitter: Allocate of the pod prepared
// as preq, on a node with host free outside its cards, which the fragment
// policy's card choice weighs, as Fit did.
func (d *Devices) AllocatePrepared(pod *v1.Pod, preq device.Prepared, host device.Host) (*device.Reservation, error) {
	p := prepared(preq)
	if p.err != nil {
		return nil, fmt.Errorf("allocate %s on node %s: invalid vGPU request: %w", Name, d.node, p.err)
	}
	req := &p.req
	if req.Empty() {
		return nil, nil
	}
	if err := cardledger.CheckNew(d.ledger, pod); err != nil {
		return nil, err
	}
	s := scratch{host: host}
	st := d.unservable(req)
	var picks []pick
	if st == nil {
		var work []cardState
		var failed int
		if picks, work, failed = d.choose(req, &s); failed >= 0 {
			st = d.explain(req, failed, work, s.forced)
		}
	}
	if st != nil {
		return nil, fmt.Errorf("allocate %s for pod %s/%s on node %s: %s", Name, pod.Namespace, pod.Name, d.node, st.Message())
	}
	uses := make([]use, len(picks))
	for i, p := range picks {
		uses[i] = use{card: p.card, entry: p.ctr, cores: p.cores, mem: p.mem, recMem: p.recMem, migGroup: p.migGroup, migPos: p.migPos}
	}
	h := newHolding(request.PodGang(pod), req.Rules, req.Roles, uses)
	value := d.encodeAllocation(picks, req.Containers)
	cardledger.Hold(d.ledger, pod, value, h, d.apply)
	now := strconv.FormatInt(d.b.clock.Now().Unix(), 10)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Allocated vGPU cards", "pod", klog.KObj(pod), "node", d.node, "cardPolicy", req.CardPolicy,
			"nodePolicy", req.NodePolicy, "cards", value)
	}
	if d.hami {
		return &device.Reservation{
			Annotations: d.hamiAnnotations(value, d.containerDevices(picks, req.Containers), len(pod.Spec.InitContainers)-req.Inits, now),
			NodeLocks:   []string{vgpuproto.HAMiNodeLock},
		}, nil
	}
	return &device.Reservation{Annotations: map[string]string{
		vgpuproto.AnnotationIDs:        value,
		vgpuproto.AnnotationToAllocate: value,
		vgpuproto.AnnotationNode:       d.node,
		vgpuproto.AnnotationTime:       now,
		vgpuproto.AnnotationBindPhase:  vgpuproto.BindPhaseAllocating,
		vgpuproto.AnnotationBindTime:   now,
	}}, nil
}

// Release gives back what Allocate took. A nil reservation, or one without
// volcano.sh/vgpu-ids-new, released nothing and is a no-op. A record that
// differs from what the pod holds, or a pod holding nothing here, is an
// error and the state is unchanged.
func (d *Devices) Release(pod *v1.Pod, r *device.Reservation) error {
	released, err := cardledger.Release(d.ledger, pod, r, d.apply)
	if v := klog.V(4); released && v.Enabled() {
		v.InfoS("Released vGPU cards", "pod", klog.KObj(pod), "node", d.node, "cards", r.Annotations[vgpuproto.AnnotationIDs])
	}
	return err
}
