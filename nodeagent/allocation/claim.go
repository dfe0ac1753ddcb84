package allocation

import (
	"cmp"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Claim is the scheduler's side of a match: what it wrote on a pending pod,
// as an agent reads it for the container a Request is for. E is the
// protocol's card in devices-to-allocate; T the protocol's stamp of the
// pod's place in the node's queue.
type Claim[E any, T cmp.Ordered] struct {
	Pod *v1.Pod
	// Entries is devices-to-allocate as the agent last knows it
	// (Tracker.View), one entry per container, decoded by the protocol.
	Entries [][]E
	// Index is the entry the request is served, Container its container.
	Index     int
	Container *v1.Container
	// Queue is the pod's place in the node's queue (Volcano's vgpu-time,
	// HAMi's bind-time): the smallest is served first, then by namespace
	// and name.
	Queue T
}

// Entry returns the cards of the entry the request is served.
func (c *Claim[E, T]) Entry() []E { return c.Entries[c.Index] }

// Before orders claims for the node's queue (Choice): by Queue, then
// namespace and name.
func (c *Claim[E, T]) Before(o *Claim[E, T]) bool {
	return cmp.Or(cmp.Compare(c.Queue, o.Queue),
		cmp.Compare(c.Pod.Namespace, o.Pod.Namespace), cmp.Compare(c.Pod.Name, o.Pod.Name)) < 0
}

// ClaimCheck is what an agent checks on every claim whatever its protocol:
// that the scheduler wrote it for this node, is trusted to have written it,
// and wrote it less than StaleAfter ago.
type ClaimCheck struct {
	// Node is this node's name.
	Node string
	// NodeKey is the annotation naming the node the claim was written for
	// (Protocol.Node); BindTimeKey the one dating it (Unix seconds).
	NodeKey, BindTimeKey string
	// StaleAfter is the allocation timeout.
	StaleAfter time.Duration
	// Trust decides whose claims are believed; the zero Trust believes
	// every scheduler's.
	Trust Trust
}

// Check refuses (ErrForged) a claim written for another node or not
// trusted, and (BindTime) one whose bind-time is not Unix seconds or is
// stale; it returns the bind-time. ref names the pod in errors.
func (k ClaimCheck) Check(pod *v1.Pod, ref string, now time.Time) (bindTime int64, err error) {
	if node := pod.Annotations[k.NodeKey]; node != k.Node {
		return 0, fmt.Errorf("pod %s: %s=%q was not written for node %s: %w", ref, k.NodeKey, node, k.Node, ErrForged)
	}
	if err := k.Trust.Check(pod, k.Node, ref); err != nil {
		return 0, err
	}
	return BindTime(pod, k.BindTimeKey, now, k.StaleAfter)
}

// EntryContainers returns the container of each of the n entries of an
// allocation in the two layouts HAMi's schedulers write and the kubelet's
// admission order follows: one entry per regular container, or, when n
// counts them all, one per init container and then one per regular
// container. ok is false for any other n (a layout of the agent's own
// protocol, or a forged one).
func EntryContainers(pod *v1.Pod, n int) (ctrs []*v1.Container, ok bool) {
	inits, regular := pod.Spec.InitContainers, pod.Spec.Containers
	switch n {
	case len(regular):
		inits = nil
	case len(inits) + len(regular):
	default:
		return nil, false
	}
	ctrs = make([]*v1.Container, 0, n)
	for i := range inits {
		ctrs = append(ctrs, &inits[i])
	}
	for i := range regular {
		ctrs = append(ctrs, &regular[i])
	}
	return ctrs, true
}

// Limit reads a container's extended resource: its limit, else its
// request.
func Limit(ctr *v1.Container, name v1.ResourceName) (resource.Quantity, bool) {
	q, ok := ctr.Resources.Limits[name]
	if !ok {
		q, ok = ctr.Resources.Requests[name]
	}
	return q, ok
}
