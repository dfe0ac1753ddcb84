package vgpu

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/deviceshare/api"
	vgpuproto "github.com/vgpushare/vshare/protocol/vgpu"
)

// Allocate picks the pod's cards (the choice FilterNode and ScoreNode made),
// accounts them and returns the annotations recording them:
// volcano.sh/vgpu-ids-new and volcano.sh/devices-to-allocate (the cards),
// volcano.sh/vgpu-node, volcano.sh/vgpu-time, volcano.sh/bind-phase
// (allocating) and volcano.sh/bind-time. It succeeds whenever FilterNode
// does. A pod without a request gets a nil reservation; a pod already
// accounted here is an error.
func (d *Devices) Allocate(pod *v1.Pod, policy string) (*api.Reservation, error) {
	var req podRequest
	err := d.b.parse(pod, policy, &req)
	if err != nil {
		return nil, fmt.Errorf("allocate %s on node %s: invalid vGPU request: %w", Name, d.node, err)
	}
	if req.empty() {
		return nil, nil
	}
	key := podKey(pod)
	if old, found := d.pods[key]; found {
		return nil, fmt.Errorf("allocate %s for pod %s/%s on node %s: the pod already holds %q",
			Name, pod.Namespace, pod.Name, d.node, old.value)
	}
	var s scratch
	picks, work, failed := d.choose(&req, &s)
	if d.tooFewCards(&req) || failed >= 0 {
		st := api.NewStatus(api.UnschedulableAndUnresolvable, ReasonTooFewCards)
		if failed >= 0 && !d.tooFewCards(&req) {
			st = d.explain(&req, failed, work)
		}
		return nil, fmt.Errorf("allocate %s for pod %s/%s on node %s: %s", Name, pod.Namespace, pod.Name, d.node, st.Message())
	}
	h := &holding{gang: podGang(pod), uses: make([]use, len(picks))}
	for i, p := range picks {
		h.uses[i] = use{card: p.card, cores: p.cores, mem: p.mem, recMem: p.recMem, migGroup: p.migGroup, migPos: p.migPos}
	}
	h.value = d.encodeAllocation(picks, req.containers)
	d.apply(h, 1)
	d.pods[key] = h
	now := strconv.FormatInt(d.b.clock.Now().Unix(), 10)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Allocated vGPU cards", "pod", klog.KObj(pod), "node", d.node, "cardPolicy", req.cardPolicy,
			"nodePolicy", req.nodePolicy, "cards", h.value)
	}
	return &api.Reservation{Annotations: map[string]string{
		vgpuproto.AnnotationIDs:        h.value,
		vgpuproto.AnnotationToAllocate: h.value,
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
func (d *Devices) Release(pod *v1.Pod, r *api.Reservation) error {
	if r == nil {
		return nil
	}
	value, found := r.Annotations[vgpuproto.AnnotationIDs]
	if !found {
		return nil
	}
	key := podKey(pod)
	h, held := d.pods[key]
	switch {
	case !held:
		return fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds no cards on node %s",
			Name, pod.Namespace, pod.Name, vgpuproto.AnnotationIDs, value, d.node)
	case h.value != value:
		return fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds %q on node %s",
			Name, pod.Namespace, pod.Name, vgpuproto.AnnotationIDs, value, h.value, d.node)
	}
	d.apply(h, -1)
	delete(d.pods, key)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Released vGPU cards", "pod", klog.KObj(pod), "node", d.node, "cards", value)
	}
	return nil
}
