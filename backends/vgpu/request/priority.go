package request

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device/podres"
)

// Task priority: a container's limit of the priority resource
// (nvidia.resourcePriorityName, default volcano.sh/vgpu-priority; HAMi names
// it nvidia.com/priority) says 0 for high or 1 for low, as in HAMi
// (pkg/device/nvidia/device.go MutateAdmission passes the limit's value to
// the container as CUDA_TASK_PRIORITY; HAMi's documentation: 0 high, 1 low,
// the default). The scheduler only validates it: the node agent reads the
// container's limit at Allocate and sets CUDA_TASK_PRIORITY, and libvgpu
// holds a low-priority container's kernel launches while a high-priority
// one on the same card is launching (libvgpu/src/priority.c). HAMi takes
// any integer and leaves an out-of-range value to HAMi-core; here it is
// refused with the resource's name before the pod is placed.
const (
	// PriorityHigh is the value of a high-priority task.
	PriorityHigh = 0
	// PriorityLow is the value of a low-priority task, also what a
	// container that names no priority runs as.
	PriorityLow = 1
)

// parsePriority validates the container's task priority, if it names one.
func (p *Parser) parsePriority(c *v1.Container) error {
	q, ok := podres.Quantity(c, p.ResPriority)
	if !ok {
		return nil
	}
	if v, present, err := podres.Whole(c, p.ResPriority, PriorityLow); present && err == nil && (v == PriorityHigh || v == PriorityLow) {
		return nil
	}
	return fmt.Errorf("container %q: %s=%s: want %d (high priority) or %d (low priority)",
		c.Name, p.ResPriority, q.String(), PriorityHigh, PriorityLow)
}
