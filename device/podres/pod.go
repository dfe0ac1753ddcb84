package podres

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
)

// Asks reports whether a container or init container of the pod names one
// of res with a non-zero quantity. Invalid values (negative, fractional)
// count as asking, so that such pods reach validation and are refused
// instead of running without a device.
func Asks(pod *v1.Pod, res ...v1.ResourceName) bool {
	return asks(pod.Spec.Containers, res) || asks(pod.Spec.InitContainers, res)
}

func asks(cs []v1.Container, res []v1.ResourceName) bool {
	for i := range cs {
		for _, r := range res {
			if q, ok := Quantity(&cs[i], r); ok && q.Sign() != 0 {
				return true
			}
		}
	}
	return false
}

// CheckInitContainers returns an error naming the pod, the init container,
// the resource and the value when an init container asks for one of res:
// for backends whose devices (what, such as "NPUs") are served to regular
// containers only. (vGPUs are served to init containers too: backends/vgpu
// init.go.)
func CheckInitContainers(pod *v1.Pod, what string, res ...v1.ResourceName) error {
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		for _, r := range res {
			if q, ok := Quantity(c, r); ok && q.Sign() != 0 {
				return fmt.Errorf("pod %s/%s init container %q: %s=%s: %s are only served to regular containers",
					pod.Namespace, pod.Name, c.Name, r, q.String(), what)
			}
		}
	}
	return nil
}

// Reader reads several whole quantities of one container and keeps the
// first error, so that a parser reads every resource and checks once.
type Reader struct {
	c   *v1.Container
	err error
}

// NewReader returns a Reader of the container's quantities.
func NewReader(c *v1.Container) *Reader { return &Reader{c: c} }

// Whole returns what Whole returns for the Reader's container, keeping the
// error for Err; once an error is kept it reads nothing and returns 0,
// false.
func (r *Reader) Whole(res v1.ResourceName, maxValue int64) (v int64, present bool) {
	if r.err != nil {
		return 0, false
	}
	v, present, r.err = Whole(r.c, res, maxValue)
	return v, present
}

// Err returns the first error Whole met, nil when there was none.
func (r *Reader) Err() error { return r.err }
