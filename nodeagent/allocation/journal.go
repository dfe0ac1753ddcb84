package allocation

import (
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
)

// DefaultJournalHorizon is how long after a list of the node's pods, or
// after a pending pod left the allocating phase other than by being served,
// a Journal does not vouch for what was pending when a request came.
const DefaultJournalHorizon = 10 * time.Second

// Journal follows the node's pods in allocating phase as the agent's pod
// informer delivers them, in the informer's order, to say which pods were
// bound before a kubelet request came when the informer had not shown them
// yet. It is an informer event handler (add it before the informer starts)
// and needs to hear of every list the informer makes (Listed).
//
// Why it can answer without asking the API server: a watch delivers every
// change of the node's pods in resourceVersion order, and nothing is
// skipped unless the informer lists again (a list may hide a pod bound and
// deleted in between). The pod the kubelet asks for (A) was bound before it
// asked. If the journal had nothing pending at the request (the Mark), A's
// bind is either still to come through the informer, or A has already left
// the allocating phase. Pods seen entering the phase after the mark are
// allowed until the first of them leaves it (the cut): up to then A, if it
// is among them, is still pending and every pod entered after A was bound
// after A, which is older by vgpu-time and chosen first; a pod bound after
// A was deleted (the scheduler's one-pending-pod-per-node rule lets the
// next pod in only then) enters after the cut and is never allowed.
//
// The case where A left before the mark (or before a list) cannot be told
// from a pod still to come, so Mark refuses, and the agent asks the API
// server as it would without a journal, within Horizon of a pending pod
// leaving other than by being served and of a list. Past the horizon the
// journal is no weaker than that list: the scheduler binds the node's next
// pod milliseconds after it sees A deleted (the pod waits for its turn
// already allocated), so a request coming seconds after A left finds the
// next pod bound already, in the list as in the journal. See
// docs/architecture.md, "Which pod a request is for".
type Journal struct {
	proto   Protocol
	horizon time.Duration
	clock   clock.PassiveClock

	mu sync.Mutex
	// seq numbers the journal's events; pending holds, for each pod in
	// allocating phase, the seq at which it entered.
	seq     uint64
	pending map[types.UID]uint64
	// exits are the recent departures from allocating phase, oldest first,
	// and the informer's lists (as departures of an unknown pod).
	exits []exit
	// listed: the informer has listed the node's pods at least once.
	listed bool
}

// exit is a pod leaving allocating phase.
type exit struct {
	entered, left uint64
	at            time.Time
	// served: it left for the success phase (this agent served it).
	served bool
}

// Mark is the journal's position when a request came.
type Mark struct{ seq uint64 }

// NewJournal returns an empty Journal for the protocol; horizon 0 means
// DefaultJournalHorizon and a nil clock the real one.
func NewJournal(proto Protocol, horizon time.Duration, clk clock.PassiveClock) *Journal {
	if horizon <= 0 {
		horizon = DefaultJournalHorizon
	}
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Journal{proto: proto, horizon: horizon, clock: clk, pending: map[types.UID]uint64{}}
}

var _ cache.ResourceEventHandler = (*Journal)(nil)

// Listed records that the informer listed the node's pods (call it from
// the informer's list function, every time). A list may hide a pod bound
// and deleted since the last event, so it counts as the departure of an
// unknown pod entered after every earlier mark: it cuts those marks (pods
// the list brings are not allowed to them) and, within the horizon, makes
// Mark refuse.
func (j *Journal) Listed() {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.listed = true
	j.seq++
	now := j.clock.Now()
	j.exits = append(j.exits, exit{entered: j.seq, left: j.seq, at: now})
	j.prune(now)
}

// OnAdd implements cache.ResourceEventHandler.
func (j *Journal) OnAdd(obj any, _ bool) {
	if pod, ok := obj.(*v1.Pod); ok {
		j.observe(pod.UID, j.proto.Pending(pod), false)
	}
}

// OnUpdate implements cache.ResourceEventHandler.
func (j *Journal) OnUpdate(_, obj any) {
	if pod, ok := obj.(*v1.Pod); ok {
		j.observe(pod.UID, j.proto.Pending(pod), j.proto.served(pod))
	}
}

// OnDelete implements cache.ResourceEventHandler. A deletion the informer
// learnt of by listing again (cache.DeletedFinalStateUnknown) also counts
// as a list.
func (j *Journal) OnDelete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		j.Listed()
		obj = tomb.Obj
	}
	if pod, ok := obj.(*v1.Pod); ok {
		j.observe(pod.UID, false, false)
	}
}

// observe records whether a pod is pending (Protocol.Pending); served says
// it left for success.
func (j *Journal) observe(uid types.UID, allocating, served bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	entered, was := j.pending[uid]
	switch {
	case allocating && !was:
		j.seq++
		j.pending[uid] = j.seq
	case !allocating && was:
		j.seq++
		delete(j.pending, uid)
		now := j.clock.Now()
		j.exits = append(j.exits, exit{entered: entered, left: j.seq, at: now, served: served})
		j.prune(now)
	}
}

// prune drops the exits older than the horizon: a mark lives for one
// request, well inside it.
func (j *Journal) prune(now time.Time) {
	i := 0
	for i < len(j.exits) && now.Sub(j.exits[i].at) > j.horizon {
		i++
	}
	if i > 0 {
		j.exits = append(j.exits[:0], j.exits[i:]...)
	}
}

// Mark returns the journal's position for a request that has just come;
// ok is false when the journal cannot vouch for what was pending (within
// the horizon of a list, or of a pending pod leaving other than by being
// served): ask the API server then.
func (j *Journal) Mark() (m Mark, ok bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if !j.listed {
		return Mark{}, false
	}
	now := j.clock.Now()
	for _, e := range j.exits {
		if !e.served && now.Sub(e.at) <= j.horizon {
			return Mark{}, false
		}
	}
	return Mark{seq: j.seq}, true
}

// Allowed returns the pods a request that came at m may be served: those
// pending now that entered allocating phase before the cut (the first
// departure of a pod that entered after m). closed reports that the cut
// has passed, so the set can only shrink.
func (j *Journal) Allowed(m Mark) (uids map[types.UID]bool, closed bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	cut := ^uint64(0)
	for i := len(j.exits) - 1; i >= 0 && j.exits[i].left > m.seq; i-- {
		if e := j.exits[i]; e.entered > m.seq && e.left < cut {
			cut = e.left
		}
	}
	uids = map[types.UID]bool{}
	for uid, entered := range j.pending {
		if entered < cut {
			uids[uid] = true
		}
	}
	return uids, cut != ^uint64(0)
}
