// Package fitcache is the deviceshare predicate's one cache, owned by the
// plugin's session: what it keeps lives for one session, and a node's
// entry holds while the node's stamp and the request's backends' epochs
// are those it was filled at. Nothing else is kept between predicates by
// the plugin.
package fitcache

import (
	"strconv"
	"sync"
	"sync/atomic"

	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
)

// Result tables.
//
// Volcano predicates every pod on hundreds of nodes and scores the nodes it
// fits, pod after pod, and most pods of a session ask for one of a few
// request shapes. Answering a repeated request from the node's Devices
// walks the session node, its device slice, the session's devices and the
// backend's Devices, then chooses cards: scattered objects per node, each
// a cache miss at a thousand nodes, measured to be most of the plugin's
// time per pod when the vGPU backend still kept its own per-node results
// (docs/benchmarks.md). The backends keep no results: a table keeps, per
// request key (device.ResultKeyer) and per node, the predicate's outcome and
// the node score (computed in the same pass where the backends are
// device.Fitters) in one dense slice indexed by the node's session index,
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

// Stamp is a node's version within the session.
type Stamp struct {
	// ver counts the changes to what the node's results read.
	ver uint32
	// volatile marks a node whose predicate outcome depends on the task
	// (terminating pods hold cards there): nothing is kept for it.
	volatile bool
}

// Table is one request key's results, indexed by session node index.
type Table struct {
	keyers []device.ResultKeyer // the request's backends, in request order
	ents   []Entry
}

// Entry is the predicate outcome and score of one key on one node.
type Entry struct {
	ver   uint32 // the node's stamp plus one when filled; 0: empty
	epoch uint32 // the request's epoch (low bits) when filled
	// Fail is nil when the node fits; failures are interned (see
	// Cache.intern), so the few kinds a session sees stay in cache.
	Fail *Failure
	// Score is the weighted node score, NaN until scored.
	Score float64
}

// Failure is a rejected node's statuses (shared by every FitError built
// from them: Volcano reads a FitError's statuses and never changes them)
// and the failure counters the rejection counts.
type Failure struct {
	Statuses []*vcapi.Status
	Counted  [][2]string // (device, reason) per FilterFailed call
}

// Cache is one session's results: per node index its stamp, per request
// key its table, and the session's interned failures and statuses.
type Cache struct {
	stamps []Stamp
	tables map[string]*Table
	// failuresMu guards failures, filled concurrently by predicates.
	failuresMu sync.Mutex
	failures   map[string]*Failure
	// statuses holds one status per code and reason; see Status.
	statuses     sync.Map // statusKey -> *vcapi.Status
	statusesSize atomic.Int64
}

// New returns an empty cache for a session of nodes nodes.
func New(nodes int) *Cache {
	return &Cache{stamps: make([]Stamp, nodes), tables: make(map[string]*Table)}
}

// Stamp returns the node's stamp, which the session moves on every write
// to the node's devices (Touch) or marks volatile.
func (c *Cache) Stamp(idx int32) *Stamp { return &c.stamps[idx] }

// Touch records a change to what the node's results read.
func (st *Stamp) Touch() { st.ver++ }

// SetVolatile marks a node whose predicate outcome depends on the task:
// nothing is kept for it for the rest of the session.
func (st *Stamp) SetVolatile() { st.volatile = true }

// Table returns the table of the request key (the backends' ResultKeys,
// keyers in request order), creating it. It is called while the session is
// built, before anything runs concurrently.
func (c *Cache) Table(key string, keyers []device.ResultKeyer) *Table {
	if t := c.tables[key]; t != nil {
		return t
	}
	t := &Table{keyers: keyers, ents: make([]Entry, len(c.stamps))}
	c.tables[key] = t
	return t
}

// Epoch is the sum of the request's backends' epochs, truncated: each
// only grows, so the sum moves whenever one does (a wrap needs 2^32
// changes within one session).
func (t *Table) Epoch() uint32 {
	var e uint64
	for _, k := range t.keyers {
		e += k.ResultEpoch()
	}
	return uint32(e)
}

// Lookup returns the node's entry when it holds a valid result for the
// current epoch, else nil; ent is the node's entry to fill (nil when the
// node's outcome may not be kept).
func (c *Cache) Lookup(t *Table, idx int32, epoch uint32) (hit, ent *Entry) {
	st := &c.stamps[idx]
	if st.volatile {
		return nil, nil
	}
	e := &t.ents[idx]
	if e.ver == st.ver+1 && e.epoch == epoch {
		return e, e
	}
	return nil, e
}

// Fill records a computed predicate outcome (fail nil: fits) and the
// node's score when the same pass computed it (NaN: not yet scored).
func (c *Cache) Fill(e *Entry, idx int32, epoch uint32, fail *Failure, score float64) {
	*e = Entry{ver: c.stamps[idx].ver + 1, epoch: epoch, Fail: c.intern(fail), Score: score}
}

// intern returns the session's one copy of a failure equal to f.
// Predicates fill entries concurrently, hence the lock; it is taken only
// when a rejection is computed, not when it is read.
func (c *Cache) intern(f *Failure) *Failure {
	if f == nil {
		return nil
	}
	var key []byte
	for _, st := range f.Statuses {
		key = strconv.AppendInt(key, int64(st.Code), 10)
		key = append(append(append(key, 0), st.Reason...), 0)
	}
	for _, ct := range f.Counted {
		key = append(append(append(append(key, 1), ct[0]...), 0), ct[1]...)
	}
	c.failuresMu.Lock()
	defer c.failuresMu.Unlock()
	if kept, ok := c.failures[string(key)]; ok {
		return kept
	}
	if c.failures == nil {
		c.failures = make(map[string]*Failure)
	}
	c.failures[string(key)] = f
	return f
}

// Status returns the session's status of code and reason (Plugin:
// plugin). Statuses are shared: neither Volcano nor the plugin modifies one
// after it is returned, so a node rejected for the same reason as the last
// thousand costs no allocation for its status.
func (c *Cache) Status(plugin string, code int, reason string) *vcapi.Status {
	key := statusKey{code, reason}
	if st, ok := c.statuses.Load(key); ok {
		return st.(*vcapi.Status)
	}
	st := &vcapi.Status{Code: code, Reason: reason, Plugin: plugin}
	// Reasons are stable strings (the plugin's Reason constants, the
	// backends' per-card reasons); the bound only guards against a backend
	// that formats them.
	if c.statusesSize.Load() < maxStatuses {
		if _, loaded := c.statuses.LoadOrStore(key, st); !loaded {
			c.statusesSize.Add(1)
		}
	}
	return st
}

type statusKey struct {
	code   int
	reason string
}

const maxStatuses = 4096
