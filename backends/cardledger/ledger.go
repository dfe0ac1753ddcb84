package cardledger

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
)

// Holding is what one pod holds on a node when its allocation is recorded
// as one pod annotation (the HAMi-style backends). The Ledger keeps the
// annotation value next to it.
type Holding interface {
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

// Spec is what a Ledger needs to know of its backend: how allocations are
// recorded and which resources they are accounted in.
type Spec struct {
	// Device names the device type in errors (the backend's name).
	Device string
	// Annotation is the pod annotation the allocation is recorded in.
	Annotation string
	// Count, Memory and Cores are the resources pods ask for, in which
	// AddQueueResource reports a holding; Factor is the MiB in one unit of
	// Memory.
	Count, Memory, Cores v1.ResourceName
	Factor               int64
	// Asks reports whether a pod asks for the device (HasDeviceRequest).
	Asks func(*v1.Pod) bool
	// Ignored lists the resources accounted per card here, which Volcano's
	// node-level resource fit must not see (GetIgnoredDevices).
	Ignored []string
}

// Ledger is the accounting of one node for a backend that records each
// pod's allocation in one pod annotation (the HAMi-style vGPU and Ascend
// backends): the holdings by pod and what the node's cards are.
//
// A backend's Devices embeds it, under an unexported alias so that only
// its methods show: AddQueueResource, HasDeviceRequest, GetIgnoredDevices
// (device.Devices) and Advertised (device.Advertiser), which need nothing else.
// The rules that change the holdings, and CardUsage, are functions taking
// the Ledger and the backend's decode and apply functions, so they do not
// become methods of every backend's Devices.
type Ledger[H Holding] struct {
	pods Pods[recorded[H]]
	node *node
}

// recorded is a holding and the annotation value it was read from or
// written as.
type recorded[H any] struct {
	value string
	h     H
}

// applied lifts a backend's apply function to recorded holdings.
func applied[H any](apply func(H, int32)) func(recorded[H], int32) {
	return func(r recorded[H], sign int32) { apply(r.h, sign) }
}

// node is what copies of a Ledger share, immutable.
type node struct {
	spec Spec
	name string
	// cards describes the node's cards for the per-card metrics.
	cards      []Card
	advertised v1.ResourceList
}

// NewLedger returns an empty Ledger for a node of the backend spec
// describes: cards describes its cards, by index, for the per-card metrics;
// advertised is the node totals Advertised returns. Neither is modified
// afterwards.
func NewLedger[H Holding](spec Spec, nodeName string, cards []Card, advertised v1.ResourceList) Ledger[H] {
	return Ledger[H]{pods: NewPods[recorded[H]](), node: &node{spec: spec, name: nodeName, cards: cards, advertised: advertised}}
}

// Clone returns an independent copy of l sharing the holdings and what
// NewLedger was given.
func Clone[H Holding](l Ledger[H]) Ledger[H] { return Ledger[H]{pods: l.pods.Clone(), node: l.node} }

// Account holds what the pod's annotation records, for AddResource: decode
// reads the value, apply adds the holding to the cards. Pods in phase
// Succeeded or Failed and pods without the annotation are ignored. A pod
// already accounted is a no-op when the record is the same and an error
// otherwise. A decode error is returned naming the pod, the node, the
// annotation and the value; the state is then unchanged. added reports
// whether a holding was added.
func Account[H Holding](l Ledger[H], pod *v1.Pod, decode func(value string) (H, error), apply func(H, int32)) (added bool, err error) {
	return AccountFrom(l, pod, l.node.spec.Annotation, decode, apply)
}

// AccountFrom is Account reading the allocation from the annotation key
// instead of the Spec's (a record another scheduler wrote). The holding is
// released like any other (Drop); Release only knows the Spec's key.
func AccountFrom[H Holding](l Ledger[H], pod *v1.Pod, key string, decode func(value string) (H, error), apply func(H, int32)) (added bool, err error) {
	if pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
		return false, nil
	}
	node := l.node.name
	value, found := pod.Annotations[key]
	if !found {
		return false, nil
	}
	if old, ok := l.pods.Get(pod); ok {
		if old.value == value {
			return false, nil
		}
		return false, fmt.Errorf("pod %s/%s: annotation %s=%q: the pod is already accounted on node %s with %q",
			pod.Namespace, pod.Name, key, value, node, old.value)
	}
	h, err := decode(value)
	if err != nil {
		return false, fmt.Errorf("pod %s/%s on node %s: annotation %s=%q: %w", pod.Namespace, pod.Name, node, key, value, err)
	}
	l.pods.Hold(pod, recorded[H]{value: value, h: h}, applied(apply))
	return true, nil
}

// CheckNew returns an error naming what the pod holds when it holds cards
// here already: Allocate must not account a pod twice.
func CheckNew[H Holding](l Ledger[H], pod *v1.Pod) error {
	if old, found := l.pods.Get(pod); found {
		return fmt.Errorf("allocate %s for pod %s/%s on node %s: the pod already holds %q",
			l.node.spec.Device, pod.Namespace, pod.Name, l.node.name, old.value)
	}
	return nil
}

// Hold records h, written as the annotation value, as what the pod holds
// and applies it (apply(h, 1)), for Allocate once CheckNew passed.
func Hold[H Holding](l Ledger[H], pod *v1.Pod, value string, h H, apply func(H, int32)) {
	l.pods.Hold(pod, recorded[H]{value: value, h: h}, applied(apply))
}

// Drop gives back what the pod holds (apply(h, -1)) and forgets it, for
// SubResource; a pod holding nothing here is a no-op.
func Drop[H Holding](l Ledger[H], pod *v1.Pod, apply func(H, int32)) {
	l.pods.Drop(pod, applied(apply))
}

// Release gives back what the reservation recorded, for Release: apply
// removes the holding from the cards. A nil reservation, or one without the
// annotation, released nothing and is a no-op. A record that differs from
// what the pod holds, or a pod holding nothing here, is an error and the
// state is unchanged. released reports whether a holding was given back.
func Release[H Holding](l Ledger[H], pod *v1.Pod, r *device.Reservation, apply func(H, int32)) (released bool, err error) {
	if r == nil {
		return false, nil
	}
	device, key, node := l.node.spec.Device, l.node.spec.Annotation, l.node.name
	value, found := r.Annotations[key]
	if !found {
		return false, nil
	}
	old, held := l.pods.Get(pod)
	switch {
	case !held:
		return false, fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds no cards on node %s",
			device, pod.Namespace, pod.Name, key, value, node)
	case old.value != value:
		return false, fmt.Errorf("release %s for pod %s/%s: annotation %s=%q: the pod holds %q on node %s",
			device, pod.Namespace, pod.Name, key, value, old.value, node)
	}
	l.pods.Drop(pod, applied(apply))
	return true, nil
}

// CardUsage returns the node's per-card metrics (device.CardReporter): cards[i]
// is the state of card i, embedding Usage, and the pod count is the
// ledger's.
func CardUsage[C interface{ Used() Usage }, H Holding](l Ledger[H], cards []C) ([]device.CardUsage, int) {
	desc := l.node.cards
	return Report(len(cards), func(i int) (Card, Usage) { return desc[i], cards[i].Used() }), l.pods.Len()
}

// AddQueueResource reports what the pod holds here in the resources pods
// ask for: cards, memory (in the memory resource's unit, rounded down) and
// cores. Nil when the pod holds nothing here.
func (l Ledger[H]) AddQueueResource(pod *v1.Pod) map[string]float64 {
	r, found := l.pods.Get(pod)
	if !found {
		return nil
	}
	t, s := r.h.Total(), l.node.spec
	return map[string]float64{
		string(s.Count):  float64(t.Cards),
		string(s.Memory): float64(t.MemMiB / s.Factor),
		string(s.Cores):  float64(t.Cores),
	}
}

// HasDeviceRequest reports whether the pod asks for the device.
func (l Ledger[H]) HasDeviceRequest(pod *v1.Pod) bool { return l.node.spec.Asks(pod) }

// GetIgnoredDevices returns a copy of the resource names accounted per card
// here, which Volcano's node-level resource fit must not see.
func (l Ledger[H]) GetIgnoredDevices() []string { return slices.Clone(l.node.spec.Ignored) }

// Advertised returns the node totals of the resources no node agent
// advertises (device.Advertiser). They are what the cards hold, in the units
// pods ask for; a container asks for at most one card's worth of each per
// card, so these totals never reject a pod the cards could take. The list
// is shared; callers must not modify it.
func (l Ledger[H]) Advertised() v1.ResourceList { return l.node.advertised }
