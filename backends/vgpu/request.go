package vgpu

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/backends/vgpu/request"
)

// parsed is the last request parse returned, for the pod object it read.
type parsed struct {
	pod        *v1.Pod
	uid        types.UID
	rv, policy string
	req        request.Pod
	err        error
}

// parse reads the pod's request and annotations into r (request.Parser).
// policy is the global policy (deviceshare.SchedulePolicy). Pods without a
// request give an empty request and no error.
//
// Volcano filters and scores one task on every node in turn, on several
// goroutines, with the same pod object: the last result is kept (keyed by
// the object, its UID and resourceVersion, and the policy) and copied out,
// which takes the parse off the per-node path. A request.Pod is read-only
// once parsed, so sharing its extra slice is safe.
func (b *Backend) parse(pod *v1.Pod, policy string, r *request.Pod) error {
	req, err := b.request(pod, policy)
	*r = *req
	return err
}

// request is parse without the copy: the returned request is shared and
// must not be modified. The per-node paths (FilterNode, ScoreNode) use it.
func (b *Backend) request(pod *v1.Pod, policy string) (*request.Pod, error) {
	if e := b.last.Load(); e != nil && e.pod == pod && e.uid == pod.UID && e.rv == pod.ResourceVersion && e.policy == policy {
		return &e.req, e.err
	}
	e := &parsed{pod: pod, uid: pod.UID, rv: pod.ResourceVersion, policy: policy}
	e.err = b.parser.Parse(pod, policy, &e.req)
	b.last.Store(e)
	return &e.req, e.err
}
