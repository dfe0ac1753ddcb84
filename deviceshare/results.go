package deviceshare

import (
	"math"
	"strconv"

	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
)

// Session result tables.
//
// Volcano predicates every pod on hundreds of nodes and scores the nodes it
// fits, pod after pod, and most pods of a session ask for one of a few
// request shapes. The backends' own caches (vGPU's per-node memo) make a
// repeated FilterNode cheap to compute, but reaching them still walks
// through the session node, its device slice, the session's devices, the
// backend's Devices and the memo entry: five scattered objects per node,
// each a cache miss at a thousand nodes, and measured to be most of the
// plugin's time per pod (docs/benchmarks.md). A result table keeps, per
// request key (device.ResultKeyer) and per node, the predicate's outcome and
// the node score in one dense slice indexed by the node's session index,
// so a pod whose key was seen answers from one entry.
//
// An entry is valid while its node's stamp and the backends' epochs are
// those it was filled at. A node's stamp moves whenever anything the
// results read can change within the session: every allocation event on
// the node (device work, and the node's idle CPU and memory, which the
// fragment policy reads), and every write to its devices (sessionDevices
// write). What else the predicate reads is either checked before the
// table (node locks, invalid or unserved requests) or makes the outcome
// depend on the task, and is then never stored: a node with terminating
// pods (volatile: whether they are waited for depends on whether Volcano
// would bind the task at once), and a failure the eviction check judged
// (it depends on which pods the task may evict).
//
// Concurrency: Volcano predicates one task on many goroutines, one node
// each, then scores the fitting nodes the same way, and runs the event
// handlers (the only writers of stamps) while neither runs; an entry is
// written only by the goroutine handling its node for the current task, so
// no entry is read and written at once.

// nodeStamp is a node's version within the session.
type nodeStamp struct {
	// ver counts the changes to what the node's results read.
	ver uint32
	// volatile marks a node whose predicate outcome depends on the task
	// (terminating pods hold cards there): nothing is kept for it.
	volatile bool
}

// resultTable is one request key's results, indexed by session node index.
type resultTable struct {
	keyers []device.ResultKeyer // the request's backends, in request order
	ents   []resultEntry
}

// resultEntry is the predicate outcome and score of one key on one node.
type resultEntry struct {
	ver   uint32 // the node's stamp plus one when filled; 0: empty
	epoch uint32 // the request's epoch (low bits) when filled
	// fail is nil when the node fits; failures are interned (see
	// sessionState.intern), so the few kinds a session sees stay in
	// cache.
	fail *keptFailure
	// score is the weighted node score, NaN until scored.
	score float64
}

// keptFailure is a rejected node's statuses (shared by every FitError
// built from them: Volcano reads a FitError's statuses and never changes
// them) and the failure counters the rejection counts.
type keptFailure struct {
	statuses []*vcapi.Status
	counted  [][2]string // (device, reason) per filterFailed call
}

// resultTableFor returns the table of the request's key, creating it, or
// nil when some backend of the request does not key its results. It is
// called while the session is built, before anything runs concurrently.
func (s *sessionState) resultTableFor(task *vcapi.TaskInfo, r *taskRequest) *resultTable {
	if r == nil || r.invalid != nil || r.unserved != "" {
		return nil
	}
	var key []byte
	keyers := make([]device.ResultKeyer, 0, len(r.backends))
	for _, i := range r.backends {
		rk, ok := s.backends[i].(device.ResultKeyer)
		if !ok {
			return nil
		}
		k, ok := rk.ResultKey(task.Pod, s.args.SchedulePolicy)
		if !ok {
			return nil
		}
		key = strconv.AppendInt(key, int64(i), 10)
		key = append(append(append(key, 0), k...), 0)
		keyers = append(keyers, rk)
	}
	if t := s.results[string(key)]; t != nil {
		return t
	}
	t := &resultTable{keyers: keyers, ents: make([]resultEntry, len(s.stamps))}
	s.results[string(key)] = t
	return t
}

// epoch is the sum of the request's backends' epochs, truncated: each
// only grows, so the sum moves whenever one does (a wrap needs 2^32
// changes within one session).
func (t *resultTable) epoch() uint32 {
	var e uint64
	for _, k := range t.keyers {
		e += k.ResultEpoch()
	}
	return uint32(e)
}

// lookup returns the node's entry when it holds a valid result for the
// current epoch, else nil; ent is the node's entry to fill (nil when the
// node's outcome may not be kept).
func (s *sessionState) lookup(t *resultTable, idx int32, epoch uint32) (hit, ent *resultEntry) {
	st := &s.stamps[idx]
	if st.volatile {
		return nil, nil
	}
	e := &t.ents[idx]
	if e.ver == st.ver+1 && e.epoch == epoch {
		return e, e
	}
	return nil, e
}

// fill records a computed predicate outcome (fail nil: fits).
func (s *sessionState) fill(e *resultEntry, idx int32, epoch uint32, fail *keptFailure) {
	*e = resultEntry{ver: s.stamps[idx].ver + 1, epoch: epoch, fail: s.intern(fail), score: math.NaN()}
}

// intern returns the session's one copy of a failure equal to f.
// Predicates fill entries concurrently, hence the lock; it is taken only
// when a rejection is computed, not when it is read.
func (s *sessionState) intern(f *keptFailure) *keptFailure {
	if f == nil {
		return nil
	}
	var key []byte
	for _, st := range f.statuses {
		key = strconv.AppendInt(key, int64(st.Code), 10)
		key = append(append(append(key, 0), st.Reason...), 0)
	}
	for _, c := range f.counted {
		key = append(append(append(append(key, 1), c[0]...), 0), c[1]...)
	}
	s.failuresMu.Lock()
	defer s.failuresMu.Unlock()
	if kept, ok := s.failures[string(key)]; ok {
		return kept
	}
	if s.failures == nil {
		s.failures = make(map[string]*keptFailure)
	}
	s.failures[string(key)] = f
	return f
}

// touch records a change to what the node's results read.
func (s *sessionState) touch(node string) {
	if sn := s.nodes[node]; sn != nil {
		s.stamps[sn.idx].ver++
	}
}
