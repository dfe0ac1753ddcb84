package allocate

import (
	"fmt"
	"strconv"

	"google.golang.org/grpc/codes"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

// ErrPriority: the container's task priority (nvidia.resourcePriorityName)
// is not 0 or 1 (codes.InvalidArgument). The scheduler refuses such a pod
// first; the agent checks again because a pod placed by another scheduler,
// or edited in between, reaches it too.
var ErrPriority = allocation.NewRefusal(codes.InvalidArgument, "invalid task priority")

// taskPriority returns the CUDA_TASK_PRIORITY value for the container: its
// limit (or request) of the priority resource, "0" (high) or "1" (low), as
// HAMi's webhook passes nvidia.com/priority (pkg/device/nvidia/device.go,
// MutateAdmission). ok is false when the container names none; libvgpu then
// runs it as low priority, HAMi-core's default.
func taskPriority(ctr *v1.Container, name string) (value string, ok bool, err error) {
	q, found := ctr.Resources.Limits[v1.ResourceName(name)]
	if !found {
		q, found = ctr.Resources.Requests[v1.ResourceName(name)]
	}
	if !found {
		return "", false, nil
	}
	if v, exact := q.AsInt64(); exact && (v == 0 || v == 1) {
		return strconv.FormatInt(v, 10), true, nil
	}
	return "", false, fmt.Errorf("container %s: %s=%s: want 0 (high priority) or 1 (low priority): %w",
		ctr.Name, name, q.String(), ErrPriority)
}
