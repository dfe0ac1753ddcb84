package gpushare

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// Allocate picks the pod's cards (see pickShareCard and pickNumberCards),
// accounts them and returns volcano.sh/gpu-index and
// volcano.sh/predicate-time. It succeeds whenever FilterNode succeeds. A pod
// without a request gets a nil reservation; a pod already accounted here is
// an error.
func (d *Devices) Allocate(pod *v1.Pod, policy string) (*device.Reservation, error) {
	req, err := d.request(pod)
	if err != nil {
		return nil, fmt.Errorf("allocate %s on node %s: %w", d.backend.name, d.node, err)
	}
	if req == 0 {
		return nil, nil
	}
	if old, found := d.pods.Get(pod); found {
		return nil, fmt.Errorf("allocate %s for pod %s/%s on node %s: the pod already holds cards %s",
			d.backend.name, pod.Namespace, pod.Name, d.node, gpushareproto.EncodeIndex(old.cards))
	}
	var h holding
	if d.backend.mode == ModeShare {
		i := d.pickShareCard(req, policy)
		if i < 0 {
			return nil, d.noFitError(pod, req)
		}
		h = holding{cards: []int{i}, memory: req}
	} else {
		ids := d.pickNumberCards(req)
		if ids == nil {
			return nil, d.noFitError(pod, req)
		}
		h = holding{whole: true, cards: ids}
	}
	d.pods.Hold(pod, h, d.apply)
	value := gpushareproto.EncodeIndex(h.cards)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Allocated GPU cards", "pod", klog.KObj(pod), "node", d.node, "device", d.backend.name,
			"policy", policy, "request", req, "cards", value)
	}
	return &device.Reservation{Annotations: map[string]string{
		gpushareproto.AnnotationGPUIndex:      value,
		gpushareproto.AnnotationPredicateTime: strconv.FormatInt(d.backend.clock.Now().UnixNano(), 10),
	}}, nil
}

// Release gives back the cards the pod holds. A nil reservation, or one
// without volcano.sh/gpu-index, released nothing and is a no-op. A
// gpu-index that differs from what the pod holds, or a pod holding nothing
// here, is an error and the state is unchanged.
func (d *Devices) Release(pod *v1.Pod, r *device.Reservation) error {
	if r == nil {
		return nil
	}
	value, found := r.Annotations[gpushareproto.AnnotationGPUIndex]
	if !found {
		return nil
	}
	h, held := d.pods.Get(pod)
	if !held {
		return fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds no cards on node %s",
			d.backend.name, pod.Namespace, pod.Name, gpushareproto.AnnotationGPUIndex, value, d.node)
	}
	if !gpushareproto.IndexIs(value, h.cards) {
		return fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds cards %q on node %s",
			d.backend.name, pod.Namespace, pod.Name, gpushareproto.AnnotationGPUIndex, value, gpushareproto.EncodeIndex(h.cards), d.node)
	}
	d.pods.Drop(pod, d.apply)
	if v := klog.V(4); v.Enabled() {
		v.InfoS("Released GPU cards", "pod", klog.KObj(pod), "node", d.node, "device", d.backend.name, "cards", value)
	}
	return nil
}
