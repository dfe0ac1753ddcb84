package cardledger

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/deviceshare/api"
)

// Holding is what one pod holds on a node when its allocation is recorded
// as one pod annotation (the HAMi-style backends).
type Holding interface {
	// Record returns the annotation value the holding was read from or
	// written as.
	Record() string
	// Total sums what the holding takes, as the pod asked for it.
	Total() Total
}

// Total sums what one pod holds on a node: its cards, the memory recorded
// for them (MiB) and the cores it asked for on them.
type Total struct {
	Cards  int
	MemMiB int64
	Cores  int64
}

// Sum returns the Total of uses; take says what one use records.
func Sum[U any](uses []U, take func(*U) (memMiB int64, cores int32)) Total {
	t := Total{Cards: len(uses)}
	for i := range uses {
		mem, cores := take(&uses[i])
		t.MemMiB += mem
		t.Cores += int64(cores)
	}
	return t
}

// Spec is what Records need to know of their node and backend besides the
// pods. It is fixed for the life of a node's state.
type Spec struct {
	// Device names the device type in errors (the backend's name).
	Device string
	// Node is the node's name.
	Node string
	// Annotation is the pod annotation the allocation is recorded in.
	Annotation string
	// Count, Memory and Cores are the resources pods ask for, in which
	// Queue reports a holding; Factor is the MiB in one unit of Memory.
	Count, Memory, Cores v1.ResourceName
	Factor               int64
}

// Records is Pods whose holdings are recorded in one pod annotation.
type Records[H Holding] struct {
	Pods[H]
	spec *Spec
}

// NewRecords returns empty Records for the node and backend s describes.
func NewRecords[H Holding](s Spec) Records[H] {
	return Records[H]{Pods: NewPods[H](), spec: &s}
}

// Clone returns an independent copy sharing the holdings and the Spec.
func (r Records[H]) Clone() Records[H] { return Records[H]{Pods: r.Pods.Clone(), spec: r.spec} }

// Account holds what the pod's annotation records, for AddResource: decode
// reads the value, apply adds the holding to the cards. Pods in phase
// Succeeded or Failed and pods without the annotation are ignored. A pod
// already accounted is a no-op when the record is the same and an error
// otherwise. A decode error is returned naming the pod, the node, the
// annotation and the value; the state is then unchanged. added reports
// whether a holding was added.
func (r Records[H]) Account(pod *v1.Pod, decode func(value string) (H, error), apply func(H, int32)) (added bool, err error) {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false, nil
	}
	s := r.spec
	value, found := pod.Annotations[s.Annotation]
	if !found {
		return false, nil
	}
	if old, ok := r.Get(pod); ok {
		if old.Record() == value {
			return false, nil
		}
		return false, fmt.Errorf("pod %s/%s: annotation %s=%q: the pod is already accounted on node %s with %q",
			pod.Namespace, pod.Name, s.Annotation, value, s.Node, old.Record())
	}
	h, err := decode(value)
	if err != nil {
		return false, fmt.Errorf("pod %s/%s on node %s: annotation %s=%q: %w", pod.Namespace, pod.Name, s.Node, s.Annotation, value, err)
	}
	r.Hold(pod, h, apply)
	return true, nil
}

// CheckNew returns an error naming what the pod holds when it holds cards
// here already: Allocate must not account a pod twice.
func (r Records[H]) CheckNew(pod *v1.Pod) error {
	if old, found := r.Get(pod); found {
		return fmt.Errorf("allocate %s for pod %s/%s on node %s: the pod already holds %q",
			r.spec.Device, pod.Namespace, pod.Name, r.spec.Node, old.Record())
	}
	return nil
}

// Release gives back what the reservation recorded, for Release: apply
// removes the holding from the cards. A nil reservation, or one without the
// annotation, released nothing and is a no-op. A record that differs from
// what the pod holds, or a pod holding nothing here, is an error and the
// state is unchanged. released reports whether a holding was given back.
func (r Records[H]) Release(pod *v1.Pod, res *api.Reservation, apply func(H, int32)) (released bool, err error) {
	if res == nil {
		return false, nil
	}
	s := r.spec
	value, found := res.Annotations[s.Annotation]
	if !found {
		return false, nil
	}
	h, held := r.Get(pod)
	switch {
	case !held:
		return false, fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds no cards on node %s",
			s.Device, pod.Namespace, pod.Name, s.Annotation, value, s.Node)
	case h.Record() != value:
		return false, fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds %q on node %s",
			s.Device, pod.Namespace, pod.Name, s.Annotation, value, h.Record(), s.Node)
	}
	r.Drop(pod, apply)
	return true, nil
}

// Queue reports what the pod holds here for AddQueueResource, in the
// resources pods ask for: cards, memory (in the memory resource's unit,
// rounded down) and cores. Nil when the pod holds nothing here.
func (r Records[H]) Queue(pod *v1.Pod) map[string]float64 {
	h, found := r.Get(pod)
	if !found {
		return nil
	}
	t, s := h.Total(), r.spec
	return map[string]float64{
		string(s.Count):  float64(t.Cards),
		string(s.Memory): float64(t.MemMiB / s.Factor),
		string(s.Cores):  float64(t.Cores),
	}
}
