package cardledger

import (
	"maps"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Key identifies a pod in a node's accounting: its UID, or namespace/name
// for a pod without one (objects that never went through the API server).
func Key(pod *v1.Pod) types.UID {
	if pod.UID != "" {
		return pod.UID
	}
	return types.UID(pod.Namespace + "/" + pod.Name)
}

// Pods is what each accounted pod holds on one node, by Key. A holding is
// never changed once recorded, so copies made by Clone share holdings and
// stay independent. The zero Pods is empty and read-only; use NewPods.
type Pods[H any] struct {
	held map[types.UID]H
}

// NewPods returns an empty Pods.
func NewPods[H any]() Pods[H] { return Pods[H]{held: make(map[types.UID]H)} }

// Clone returns an independent copy sharing the holdings.
func (p Pods[H]) Clone() Pods[H] { return Pods[H]{held: maps.Clone(p.held)} }

// Len returns the number of pods holding cards.
func (p Pods[H]) Len() int { return len(p.held) }

// Get returns what the pod holds; found is false when it holds nothing.
func (p Pods[H]) Get(pod *v1.Pod) (h H, found bool) {
	h, found = p.held[Key(pod)]
	return h, found
}

// Hold records h as what the pod holds and applies it (apply(h, 1)). The
// caller has checked that the pod holds nothing yet.
func (p Pods[H]) Hold(pod *v1.Pod, h H, apply func(H, int32)) {
	apply(h, 1)
	p.held[Key(pod)] = h
}

// Drop gives back what the pod holds (apply(h, -1), the inverse of Hold)
// and forgets it. found is false, and nothing changes, when the pod holds
// nothing here.
func (p Pods[H]) Drop(pod *v1.Pod, apply func(H, int32)) (h H, found bool) {
	key := Key(pod)
	h, found = p.held[key]
	if found {
		apply(h, -1)
		delete(p.held, key)
	}
	return h, found
}
