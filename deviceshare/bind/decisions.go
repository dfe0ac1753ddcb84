package bind

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/device"
)

// intentTTL bounds how long a decision nobody binds or accounts is kept (a
// pipelined task is never bound and never deallocated).
const intentTTL = 10 * time.Minute

// sweepEvery is how often claim looks for expired decisions.
const sweepEvery = time.Minute

// Decision is one allocation a session made for a pod: what its bind sends
// and takes first, and, while Assumed, what the plugin's node state accounts
// for the pod until the informer shows the pod carrying it. It is the one
// record of that allocation; its fields are not changed once recorded.
type Decision struct {
	// Node is where the cards were chosen.
	Node string
	// Annotations record the allocation; the bind adds them to the pod's
	// own annotations on the v1.Binding.
	Annotations map[string]string
	// Locks are the node locks the bind takes first (nil: none).
	Locks *NodeLocks
	// Ordered are the allocated device types whose node agent serves one
	// pending pod per node at a time.
	Ordered []OrderedKey
	// Inventories are the node's inventories the allocation was made on.
	Inventories []InventoryStamp
	// Assumed makes the node state account the allocation from this decision
	// until the pod shows it or leaves the node. A pipelined task's
	// reservation lives in its session's view only, so it is not assumed.
	Assumed bool

	since   time.Time
	refused error
	claimed bool
	// source and effective cache the pod with Annotations applied; only
	// the node state reads them, under its own lock (Effective).
	source, effective *v1.Pod
}

// Effective returns pod with the decision's annotations, reusing the copy
// while the informer object is unchanged. Not safe for concurrent use: the
// node state calls it under its lock.
func (d *Decision) Effective(pod *v1.Pod) *v1.Pod {
	if d.source != pod || d.effective == nil {
		d.source = pod
		d.effective = device.ApplyReservation(pod, &device.Reservation{Annotations: d.Annotations})
	}
	return d.effective
}

// Cached returns the last pod Effective built (nil if none).
func (d *Decision) Cached() *v1.Pod { return d.effective }

// NodeLocks are the node locks a bind takes first, and how long a lock
// found on the node holds (deviceshare.NodeLockExpiry).
type NodeLocks struct {
	Keys []string
	// Agent are the keys reservations asked for (device.Reservation.NodeLocks):
	// a live one whose holder pod is gone or terminated is taken over, as
	// HAMi's scheduler does, since that agent would never release it.
	Agent []string
	TTL   time.Duration
}

// InventoryStamp names the node state's generation of one device type's
// inventory on a node.
type InventoryStamp struct {
	Backend string
	Gen     uint64
}

// Decisions hold every Decision from the session that made it until it is
// done, by one rule: a decision ends when its session discards it
// (Forget), when the node state settles an assumed one (its pod shows the
// allocation, or left the node: the bind failed or the pod is gone), or,
// if not assumed, when its bind claims it or intentTTL passes unclaimed.
//
// Locking: mu guards the map; Decision values are immutable once recorded
// but for claimed (under mu) and the node state's cache (under the node state's lock).
type Decisions struct {
	mu    sync.Mutex
	clock clock.PassiveClock
	m     map[types.UID]*Decision
	// swept is when claim last dropped expired decisions.
	swept time.Time
}

// NewDecisions returns an empty record.
func NewDecisions(clk clock.PassiveClock) *Decisions {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Decisions{clock: clk, m: make(map[types.UID]*Decision)}
}

// Record stores the session's decision for the pod, replacing an earlier
// one (a later session's allocation of a task pipelined before) and its
// refusal.
func (ds *Decisions) Record(uid types.UID, d Decision) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d.since = ds.clock.Now()
	ds.m[uid] = &d
}

// Refuse makes the pod's bind fail with err: its allocation failed in the
// session, or broke a limit after it was recorded. A recorded decision
// stays what the node state accounts until the node state settles it.
func (ds *Decisions) Refuse(uid types.UID, err error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d := &Decision{}
	if old := ds.m[uid]; old != nil {
		*d = *old
	}
	d.since, d.refused, d.claimed = ds.clock.Now(), err, false
	ds.m[uid] = d
}

// Forget drops the pod's decision (discarded in its session).
func (ds *Decisions) Forget(uid types.UID) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	delete(ds.m, uid)
}

// AnnotationsFor returns the allocation annotations decided for the pod.
func (ds *Decisions) AnnotationsFor(uid types.UID) map[string]string {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d := ds.m[uid]; d != nil {
		return d.Annotations
	}
	return nil
}

// claim returns the pod's decision for its bind, once: a second claim
// without a new Record finds none. An assumed decision stays for the
// node state. At most once per sweepEvery it also drops unassumed decisions
// nobody claimed within intentTTL, so a burst of binds does not walk every
// decision once per pod.
func (ds *Decisions) claim(uid types.UID) *Decision {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	d := ds.m[uid]
	if d != nil && d.claimed {
		d = nil
	} else if d != nil {
		if d.Assumed {
			d.claimed = true
		} else {
			delete(ds.m, uid)
		}
	}
	now := ds.clock.Now()
	if now.Sub(ds.swept) < sweepEvery {
		return d
	}
	ds.swept = now
	for id, other := range ds.m {
		if !other.Assumed && now.Sub(other.since) > intentTTL {
			delete(ds.m, id)
		}
	}
	return d
}

// Assumed returns the pod's assumed decision, or nil.
func (ds *Decisions) Assumed(uid types.UID) *Decision {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d := ds.m[uid]; d != nil && d.Assumed {
		return d
	}
	return nil
}

// AssumedNow returns the assumed decisions by pod, a copy of the map the
// caller may change, so that a walk over every pod of every node (the
// node state's Sync) takes the lock once, not once per pod. Decisions are
// recorded, refused and forgotten only by the session's event handlers,
// never while Sync runs, so the copy stays current through it.
func (ds *Decisions) AssumedNow() map[types.UID]*Decision {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	out := make(map[types.UID]*Decision, len(ds.m))
	for uid, d := range ds.m {
		if d.Assumed {
			out[uid] = d
		}
	}
	return out
}

// Settle ends an assumed decision: the node state saw its pod carry the
// allocation.
func (ds *Decisions) Settle(uid types.UID) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if d := ds.m[uid]; d != nil && d.Assumed {
		delete(ds.m, uid)
	}
}

// SettleUnseen ends the assumed decisions whose pods the node state did not see
// pending on their node (the bind failed, the pod is gone) and returns how
// many it ended and how many remain assumed.
func (ds *Decisions) SettleUnseen(seen map[types.UID]bool) (dropped, remaining int) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for uid, d := range ds.m {
		if !d.Assumed {
			continue
		}
		if !seen[uid] {
			dropped++
			delete(ds.m, uid)
			continue
		}
		remaining++
	}
	return dropped, remaining
}

// EachAssumed calls fn for every assumed decision.
func (ds *Decisions) EachAssumed(fn func(uid types.UID, d *Decision)) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	for uid, d := range ds.m {
		if d.Assumed {
			fn(uid, d)
		}
	}
}

// CountAssumed returns how many decisions are assumed.
func (ds *Decisions) CountAssumed() int {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	n := 0
	for _, d := range ds.m {
		if d.Assumed {
			n++
		}
	}
	return n
}
