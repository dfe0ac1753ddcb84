package allocation

import (
	"context"
	"errors"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Request is the kubelet's side of a match: one container request for
// Devices devices, which names no pod.
type Request struct {
	// Devices is how many devices the kubelet asks for.
	Devices int
	// Now dates the request: claims older than the allocation timeout are
	// stale from it (ClaimCheck) and the Tracker forgets by it.
	Now time.Time
	// Allow is the pods the request may be served (Arrival.Allowed); nil
	// admits any.
	Allow map[types.UID]bool
}

// Admits reports whether the request may be served the pod.
func (r Request) Admits(pod *v1.Pod) bool { return r.Allow == nil || r.Allow[pod.UID] }

// Choice is the agent's side of a match: which of the node's pending pods
// a Request is for. The agent reads each pod's claim with its protocol and
// offers it (Offer), or why the pod has none for the request; Choice keeps
// the first claim in queue order, marks a refused pod failed as it is
// offered, and says why no pod matched (Err). How an offered error counts:
//
//   - ErrNotForRequest: the pod is passed over (another request is its);
//   - ErrNotAllocating: the pod is no longer waiting (Misses.Inactive);
//   - ErrNotBound: refused, but the pod is not this agent's to mark;
//   - anything else: refused, and the pod's allocation fails (Tracker.Fail).
//
// The agent's loop is the whole search: no callback runs between the kit
// and the agent's code.
type Choice[C any] struct {
	tracker *Tracker
	before  func(a, b C) bool
	best    C
	found   bool
	misses  Misses
}

// NewChoice returns a Choice that orders claims by before (Claim.Before,
// usually). With a tracker a refused pod is marked failed; without one the
// choice only looks (GetPreferredAllocation).
func NewChoice[C any](tracker *Tracker, before func(a, b C) bool) *Choice[C] {
	return &Choice[C]{tracker: tracker, before: before}
}

// Offer considers the pod: its claim c when err is nil, else why it has
// none for the request (see Choice for how err counts).
func (ch *Choice[C]) Offer(ctx context.Context, pod *v1.Pod, c C, err error) {
	switch {
	case err == nil:
		if !ch.found || ch.before(c, ch.best) {
			ch.best, ch.found = c, true
		}
	case errors.Is(err, ErrNotAllocating):
		ch.misses.Inactive(err)
	case errors.Is(err, ErrNotForRequest):
		ch.misses.Skipped(err)
	case errors.Is(err, ErrNotBound): // bound elsewhere: not this agent's to fail
		ch.misses.Refused(err)
	default:
		if ch.tracker != nil {
			ch.tracker.Fail(ctx, pod, err)
		}
		ch.misses.Refused(err)
	}
}

// Chosen returns the first claim offered in queue order; ok is false when
// no pod had one.
func (ch *Choice[C]) Chosen() (c C, ok bool) { return ch.best, ch.found }

// Refused reports whether an offered pod was refused.
func (ch *Choice[C]) Refused() bool { return ch.misses.refusal != nil }

// Err is Misses.Err for the pods offered: the error for a request no pod
// matched.
func (ch *Choice[C]) Err(msg string, noPending error) (refused bool, err error) {
	return ch.misses.Err(msg, noPending)
}
