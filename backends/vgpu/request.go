package vgpu

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/vgpu/request"
)

// parse reads the pod's request and annotations into r (request.Parser).
// policy is the global policy (deviceshare.SchedulePolicy). Pods without a
// request give an empty request and no error.
func (b *Backend) parse(pod *v1.Pod, policy string, r *request.Pod) error {
	return b.parser.Parse(pod, policy, r)
}
