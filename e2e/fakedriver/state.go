package fakedriver

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/vgpushare/vshare/e2e/fakedriver/cards"
)

// Errors of the requests, as the ERR reasons clients see.
var (
	errFreeExceedsHeld = errors.New("free exceeds held")
	errCtxBelowZero    = errors.New("context count below zero")
	errGone            = errors.New("connection gone")
)

// state is the driver's ground truth: every device's memory, contexts,
// queues and utilisation history, and every process the driver has known.
//
// One mutex guards all of it. Requests are a few map look-ups and the
// scheduler tick touches every device anyway, so finer locks would buy
// nothing but lock-order rules.
type state struct {
	mu    sync.Mutex
	devs  []*device
	procs map[int]*process // by host pid; kept after the process ends
	// vt is the time the execution model has run up to, on the tick grid.
	vt time.Time
	// periodEnd is the end of the sample period in progress.
	periodEnd time.Time
	// exports are the allocations shared between processes (shared.go).
	exports    map[uint64]*export
	nextExport uint64
}

// device is one GPU's state.
type device struct {
	idx        int
	cfg        Device
	facts      cards.Facts // cfg's NVML facts, defaults applied
	used, peak uint64
	hostUsed   uint64               // pinned host memory mapped for the card (host.go), not in used
	busyNS     uint64               // whole-device time during which any work ran
	groups     map[string]*groupMem // memory of the groups with a member on it
	active     []*process           // processes with work queued, unordered
	// wake is closed (and replaced) whenever a queue on the device shrinks
	// or is dropped, so LAUNCH and SYNC waiters look again.
	wake chan struct{}
	// curBusy and curService are the sample period in progress.
	curBusy    uint64
	curService map[int]uint64
	periods    []period // the last keptPeriods complete periods, oldest first
}

// period is one complete utilisation sample period of a device.
type period struct {
	endUS   int64          // CLOCK_REALTIME microseconds of the period's end
	busyNS  uint64         // time during which any work ran
	service map[int]uint64 // service each pid received, only pids with some
}

// groupMem is a group's memory on one device.
type groupMem struct {
	bytes, peak uint64
	// Pinned host memory mapped for the card (host.go), and the peak of
	// bytes+hostBytes.
	hostBytes, hostPeak, totalPeak uint64
}

// process is what the driver knows of one host pid. It outlives the
// process's connections so the tests can read its peaks and service
// afterwards; a pid that connects again (reuse, or a new connection after
// all were closed) carries on with the same record.
type process struct {
	pid   int
	conns int // open connections; the process is alive while above 0
	group string
	devs  []procDev // by device index
}

// procDev is a process's state on one device.
type procDev struct {
	bytes, peak uint64
	// Pinned host memory mapped for the card (host.go): not card memory.
	hostBytes, hostPeak uint64
	ctxs                int
	queuedNS            uint64
	serviceNS           uint64
	inActive            bool // listed in device.active
	touched             bool // ever allocated, made a context or launched here
}

// newState returns the state of a driver with the given (validated) devices
// whose execution model starts at now.
func newState(devs []Device, now time.Time) *state {
	fs, _ := cards.Resolve(devs)
	s := &state{
		procs:     make(map[int]*process),
		vt:        now,
		periodEnd: now.Add(samplePeriod),
	}
	for i, d := range devs {
		s.devs = append(s.devs, &device{
			idx:        i,
			cfg:        d,
			facts:      fs[i],
			groups:     make(map[string]*groupMem),
			wake:       make(chan struct{}),
			curService: make(map[int]uint64),
		})
	}
	return s
}

// lookupLocked returns the record of pid, creating it.
func (s *state) lookupLocked(pid int) *process {
	p, ok := s.procs[pid]
	if !ok {
		p = &process{pid: pid, devs: make([]procDev, len(s.devs))}
		s.procs[pid] = p
	}
	return p
}

// attach records a new connection of pid and returns its process. When
// the process becomes alive, a non-empty group (Config.GroupOf's answer)
// replaces the group it had.
func (s *state) attach(pid int, group string) *process {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.lookupLocked(pid)
	p.conns++
	if p.conns == 1 && group != "" {
		s.setGroupLocked(p, group)
	}
	return p
}

// end records the end of connection cn, once however often it is called.
// The end of a process's last connection is the end of the process: like
// the kernel driver when a process exits, the driver frees its memory and
// drops its contexts and queued work.
func (s *state) end(cn *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if cn.ended {
		return
	}
	cn.ended = true
	p := cn.p
	p.conns--
	if p.conns > 0 {
		return
	}
	s.endSharedLocked(p)
	for _, d := range s.devs {
		pd := &p.devs[d.idx]
		d.used -= pd.bytes
		if p.group != "" && pd.bytes > 0 {
			d.groupLocked(p.group).bytes -= pd.bytes
		}
		pd.bytes, pd.ctxs = 0, 0
		if pd.queuedNS > 0 {
			pd.queuedNS = 0
			d.wakeLocked()
		}
	}
	s.endHostLocked(p)
}

// alloc takes bytes of device d for p; false means out of memory.
func (s *state) alloc(p *process, d int, bytes uint64) bool {
	if bytes == 0 {
		// Nothing to take. cuMemAlloc(0) is refused by libcuda
		// (CUDA_ERROR_INVALID_VALUE) before it reaches the driver; what
		// does reach it with 0 (a stub's context with
		// VGPU_STUB_CTX_MEM=0) must succeed, as the contract allows
		// only OK or OOM.
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	dev := s.devs[d]
	if p.conns <= 0 {
		// Gone (reaped) while its last request was on the way: a dead
		// process takes nothing.
		return false
	}
	if bytes > dev.cfg.TotalBytes-dev.used {
		return false
	}
	pd := &p.devs[d]
	pd.touched = true
	dev.used += bytes
	dev.peak = max(dev.peak, dev.used)
	pd.bytes += bytes
	pd.peak = max(pd.peak, pd.bytes)
	if p.group != "" {
		g := dev.groupLocked(p.group)
		g.bytes += bytes
		g.peak = max(g.peak, g.bytes)
		dev.notePeakTotalLocked(p.group)
	}
	return true
}

// free gives back bytes p holds on device d.
func (s *state) free(p *process, d int, bytes uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pd := &p.devs[d]
	if bytes > pd.bytes {
		return errFreeExceedsHeld
	}
	dev := s.devs[d]
	pd.bytes -= bytes
	dev.used -= bytes
	if p.group != "" {
		dev.groupLocked(p.group).bytes -= bytes
	}
	return nil
}

// context adds delta (1 or -1) to p's context count on device d. Memory
// is the process's, not the context's: dropping the last context frees
// nothing (the client frees a context's allocations before destroying it).
func (s *state) context(p *process, d int, delta int) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	pd := &p.devs[d]
	if pd.ctxs+delta < 0 {
		return errCtxBelowZero
	}
	pd.ctxs += delta
	pd.touched = true
	return nil
}

// memInfo returns device d's total and used bytes.
func (s *state) memInfo(d int) (total, used uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.devs[d].cfg.TotalBytes, s.devs[d].used
}

// setGroup puts pid in group ("" for none), moving the memory it holds.
func (s *state) setGroup(pid int, group string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setGroupLocked(s.lookupLocked(pid), group)
}

// setGroupLocked moves p and the memory it holds to group.
func (s *state) setGroupLocked(p *process, group string) {
	if p.group == group {
		return
	}
	for _, d := range s.devs {
		b := p.devs[d.idx].bytes
		if p.group != "" {
			d.groupLocked(p.group).bytes -= b
		}
		if group != "" {
			g := d.groupLocked(group)
			g.bytes += b
			g.peak = max(g.peak, g.bytes)
		}
	}
	s.moveHostLocked(p, p.group, group)
	p.group = group
}

// groupLocked returns the memory record of group on d, creating it.
func (d *device) groupLocked(group string) *groupMem {
	g, ok := d.groups[group]
	if !ok {
		g = &groupMem{}
		d.groups[group] = g
	}
	return g
}

// wakeLocked tells the device's LAUNCH and SYNC waiters to look again.
func (d *device) wakeLocked() {
	close(d.wake)
	d.wake = make(chan struct{})
}

// sortedPidsLocked returns the known pids in ascending order.
func (s *state) sortedPidsLocked() []int {
	pids := make([]int, 0, len(s.procs))
	for pid := range s.procs {
		pids = append(pids, pid)
	}
	sort.Ints(pids)
	return pids
}
