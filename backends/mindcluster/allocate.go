package mindcluster

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// Allocate picks the chips FilterNode found, accounts them and returns the
// annotations MindCluster's device plugin reads: huawei.com/npu-core ("0,1"
// or "0-vir02") and predicate-time (Unix nanoseconds), plus
// volcano.sh/predicate-time with the same value. It succeeds exactly when
// FilterNode does and calls no API.
func (d *Devices) Allocate(pod *v1.Pod, policy string) (*device.Reservation, error) {
	if !asks(pod) {
		return nil, nil
	}
	if _, held := d.pods[pod.UID]; held {
		return nil, fmt.Errorf("pod %s/%s already holds %s chips on node %s", pod.Namespace, pod.Name, Name, d.inv.node)
	}
	req, err := parseRequest(pod)
	if err != nil {
		return nil, fmt.Errorf("allocate %s chips: %w", Name, err)
	}
	c, st := d.fit(req, policy)
	if !st.IsSuccess() {
		return nil, fmt.Errorf("allocate %s chips on node %s: %s", Name, d.inv.node, st.Message())
	}
	h := holding{chips: c.chips, template: c.template, inflight: c.template != "", vgroup: -1}
	d.apply(h, 1)
	d.pods[pod.UID] = h
	now := strconv.FormatInt(d.b.clock.Now().UnixNano(), 10)
	return &device.Reservation{Annotations: map[string]string{
		mindclusterproto.AnnotationNPUCore:              h.encode(),
		mindclusterproto.AnnotationPredicateTime:        now,
		mindclusterproto.AnnotationVolcanoPredicateTime: now,
	}}, nil
}

// Release gives back what Allocate took for the pod. A reservation that
// does not match what the pod holds is refused, and changes nothing.
func (d *Devices) Release(pod *v1.Pod, r *device.Reservation) error {
	h, ok := d.pods[pod.UID]
	if !ok {
		return fmt.Errorf("release %s chips: pod %s/%s holds none on node %s", Name, pod.Namespace, pod.Name, d.inv.node)
	}
	if r != nil {
		if got := r.Annotations[mindclusterproto.AnnotationNPUCore]; got != h.encode() {
			return fmt.Errorf("release %s chips: reservation %s=%q does not match the pod's allocation %q",
				Name, mindclusterproto.AnnotationNPUCore, got, h.encode())
		}
	}
	d.apply(h, -1)
	delete(d.pods, pod.UID)
	return nil
}
