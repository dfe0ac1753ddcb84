package fakedriver

import (
	"math"
	"sort"
	"time"

	"k8s.io/utils/clock"
)

// run advances the execution model to clk's time at each tick of t until
// stop is closed.
func (s *state) run(t clock.Ticker, clk clock.PassiveClock, stop <-chan struct{}) {
	for {
		select {
		case <-stop:
			return
		case <-t.C():
			s.advance(clk.Now())
		}
	}
}

// advance runs the execution model up to now, tick by tick. A late call (a
// loaded host, a fake clock stepped far ahead) gives exactly the service
// the missed ticks would have given, so the model's time never drifts from
// the clock's; only stretches in which no device has work are skipped in
// one step.
func (s *state) advance(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	progressed := make([]bool, len(s.devs))
	for !s.vt.Add(tick).After(now) {
		if s.anyActiveLocked() {
			s.vt = s.vt.Add(tick)
			for i, d := range s.devs {
				if d.runTickLocked(uint64(tick)) > 0 {
					progressed[i] = true
				}
			}
		} else {
			// Idle: nothing happens before the period ends.
			until := now
			if s.periodEnd.Before(until) {
				until = s.periodEnd
			}
			s.vt = s.vt.Add(until.Sub(s.vt).Truncate(tick))
		}
		if !s.vt.Before(s.periodEnd) {
			for _, d := range s.devs {
				d.closePeriodLocked(s.periodEnd.UnixMicro())
			}
			s.periodEnd = s.periodEnd.Add(samplePeriod)
		}
	}
	for i, d := range s.devs {
		if progressed[i] {
			d.wakeLocked()
		}
	}
}

// anyActiveLocked reports whether any device has work queued.
func (s *state) anyActiveLocked() bool {
	for _, d := range s.devs {
		if len(d.active) > 0 {
			return true
		}
	}
	return false
}

// runTickLocked hands out budget ns of device time among the processes
// with work queued, by processor sharing: each gets an even share of what
// is left, and one that needs less than its share leaves the rest to the
// others (water-filling, smallest need first). It returns the time given.
func (d *device) runTickLocked(budget uint64) uint64 {
	n := len(d.active)
	if n == 0 {
		return 0
	}
	sort.Slice(d.active, func(i, j int) bool {
		a, b := &d.active[i].devs[d.idx], &d.active[j].devs[d.idx]
		if a.queuedNS != b.queuedNS {
			return a.queuedNS < b.queuedNS
		}
		return d.active[i].pid < d.active[j].pid
	})
	var given uint64
	still := d.active[:0]
	for i, p := range d.active {
		pd := &p.devs[d.idx]
		g := min(pd.queuedNS, budget/uint64(n-i))
		pd.queuedNS -= g
		pd.serviceNS += g
		d.curService[p.pid] += g
		budget -= g
		given += g
		if pd.queuedNS > 0 {
			still = append(still, p)
		} else {
			pd.inActive = false
		}
	}
	clear(d.active[len(still):])
	d.active = still
	d.busyNS += given
	d.curBusy += given
	return given
}

// closePeriodLocked ends the sample period in progress at endUS and keeps
// the last keptPeriods periods.
func (d *device) closePeriodLocked(endUS int64) {
	p := period{endUS: endUS, busyNS: d.curBusy}
	for pid, svc := range d.curService {
		if svc == 0 {
			continue
		}
		if p.service == nil {
			p.service = make(map[int]uint64, len(d.curService))
		}
		p.service[pid] = svc
	}
	if len(d.periods) == keptPeriods {
		copy(d.periods, d.periods[1:])
		d.periods = d.periods[:keptPeriods-1]
	}
	d.periods = append(d.periods, p)
	d.curBusy = 0
	clear(d.curService)
}

// launch queues workNS of device d's time for p, once p's queue there is
// within the push buffer: like cuLaunchKernel, which blocks while the
// channel's push buffer is full. It gives up with errGone when gone is
// closed.
func (s *state) launch(p *process, d int, workNS uint64, gone <-chan struct{}) error {
	dev := s.devs[d]
	return s.await(p, d, gone, func(pd *procDev) bool {
		if pd.queuedNS > uint64(pushBuffer) {
			return false
		}
		pd.touched = true
		pd.queuedNS = satAdd(pd.queuedNS, workNS)
		if pd.queuedNS > 0 && !pd.inActive {
			pd.inActive = true
			dev.active = append(dev.active, p)
		}
		return true
	})
}

// sync waits until p has no work queued on device d (cuCtxSynchronize).
func (s *state) sync(p *process, d int, gone <-chan struct{}) error {
	return s.await(p, d, gone, func(pd *procDev) bool { return pd.queuedNS == 0 })
}

// await calls try with the lock held until it returns true, waiting for
// device d's queues to change between calls. It gives up with errGone once
// p has ended, whichever noticed first: its connection's goroutine (gone)
// or a reap.
func (s *state) await(p *process, d int, gone <-chan struct{}, try func(*procDev) bool) error {
	for {
		s.mu.Lock()
		if p.conns <= 0 {
			// Reaped while it waited (Driver.reap dropped its queue and
			// woke the device): a dead process queues nothing more.
			s.mu.Unlock()
			return errGone
		}
		if try(&p.devs[d]) {
			s.mu.Unlock()
			return nil
		}
		wake := s.devs[d].wake
		s.mu.Unlock()
		select {
		case <-wake:
		case <-gone:
			return errGone
		}
	}
}

// utilSample is one process's utilisation as PUTIL reports it.
type utilSample struct {
	pid   int
	tsUS  int64
	smPct uint64
}

// procUtil returns, for each process with samples on device d stamped
// after lastSeenUS, one entry in pid order: the newest sample's timestamp
// and the mean of those samples' utilisation. NVML returns one sample per
// process, not one per process and period.
func (s *state) procUtil(d int, lastSeenUS uint64) []utilSample {
	s.mu.Lock()
	defer s.mu.Unlock()
	type acc struct {
		serviceNS, periods uint64
		tsUS               int64
	}
	accs := make(map[int]*acc)
	for _, per := range s.devs[d].periods {
		if per.endUS < 0 || uint64(per.endUS) <= lastSeenUS {
			continue
		}
		for pid, svc := range per.service {
			a, ok := accs[pid]
			if !ok {
				a = &acc{}
				accs[pid] = a
			}
			a.serviceNS += svc
			a.periods++
			a.tsUS = per.endUS
		}
	}
	out := make([]utilSample, 0, len(accs))
	for pid, a := range accs {
		pct := percent(a.serviceNS, a.periods*uint64(samplePeriod))
		out = append(out, utilSample{pid: pid, tsUS: a.tsUS, smPct: pct})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].pid < out[j].pid })
	return out
}

// devUtil returns the percentage of device d's last complete sample
// period during which any work ran; 0 before the first period ends.
func (s *state) devUtil(d int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	ps := s.devs[d].periods
	if len(ps) == 0 {
		return 0
	}
	return percent(ps[len(ps)-1].busyNS, uint64(samplePeriod))
}

// busy returns the device time pid's work has received on device d.
func (s *state) busy(d, pid int) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.procs[pid]; ok {
		return p.devs[d].serviceNS
	}
	return 0
}

// percent returns num/den as a rounded percentage, at most 100.
func percent(num, den uint64) uint64 {
	if den == 0 {
		return 0
	}
	return min(100, (num*100+den/2)/den)
}

// satAdd adds without wrapping around.
func satAdd(a, b uint64) uint64 {
	if a > math.MaxUint64-b {
		return math.MaxUint64
	}
	return a + b
}
