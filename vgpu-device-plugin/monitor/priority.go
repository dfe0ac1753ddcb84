package monitor

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Task priorities (CUDA_TASK_PRIORITY, the region header's priority).
const (
	PriorityHigh = 0
	PriorityLow  = 1
)

// DefaultPriorityInterval is how often the Prioritizer relays stamps. It
// must stay well under libvgpu's 200 ms priority window
// (libvgpu/src/priority.c), or a low-priority container would run between
// two relays while its high-priority neighbour is busy.
const DefaultPriorityInterval = 50 * time.Millisecond

// DefaultPriorityRescan is how often the Prioritizer looks for regions that
// appeared or went. Between two looks it reads and writes only the regions
// it found on cards that need relaying, through files it keeps open: a
// directory scan and a header read of every region of the node on every
// 50 ms pass cost each agent about as much CPU as serving its pods'
// Allocates (make bench-e2e's CPU breakdown). BenchmarkPrioritizerSync, ten
// containers: about 2 us a pass between rescans, 165 us a rescan (which
// lists a container directory again only when it changed).
// So a container that starts beside a busy high-priority one may launch
// unheld for up to this long (HAMi's monitor takes 5 to 10 s).
const DefaultPriorityRescan = 500 * time.Millisecond

// Prioritizer carries task priority (CUDA_TASK_PRIORITY) across containers.
// libvgpu stamps, in its container's region, the time of the latest kernel
// launch at high priority per device (prio_launch_ns[0], CLOCK_MONOTONIC_COARSE,
// which is the node's clock in every container); a container cannot read
// its neighbours' regions, so for every card the Prioritizer writes into
// each region on it the newest stamp of the *other* regions on that card
// (peer_high_ns). A low-priority process holds its launches while that
// stamp is recent. This is HAMi's monitor loop (cmd/vGPUmonitor/feedback.go:
// Observe, CheckBlocking, every 5 s) with a timestamp instead of HAMi-core's
// recent_kernel counter, so nothing has to be reset: a stamp simply ages,
// also when the high-priority container dies.
//
// Only cards held by two or more regions, one of which is high priority
// (or has a high-priority stamp), need relaying; the Prioritizer keeps
// those regions open and rescans the cache directory every Rescan. It is
// not safe for concurrent use.
type Prioritizer struct {
	// CacheDir is the agent's cache directory.
	CacheDir string
	// Pods finds the node's pods; regions of other pods are not read.
	Pods PodByUID
	// Rescan is how often the directory is scanned again; 0 means
	// DefaultPriorityRescan.
	Rescan time.Duration
	// Clock times the rescans; nil means the real clock.
	Clock clock.PassiveClock

	scanned time.Time
	watched []watchedRegion
	dirs    regionDirs
}

// watchedRegion is an open region on a card that needs relaying.
type watchedRegion struct {
	path string
	f    *os.File
	uuid []string
}

// stampsLen is the span of prio_launch_ns[0][*] .. peer_high_ns[*] read per
// region and pass.
const stampsLen = offPeerHigh + 8*MaxDevices - offPrioLaunch

// Sync relays the stamps once and returns how many words it wrote.
func (p *Prioritizer) Sync() int {
	clk := p.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if now := clk.Now(); p.scanned.IsZero() || now.Sub(p.scanned) >= p.rescanEvery() {
		p.rescan()
		p.scanned = now
	}
	if len(p.watched) == 0 {
		return 0
	}
	regions := make([]regionRef, 0, len(p.watched))
	files := make([]*os.File, 0, len(p.watched))
	var buf [stampsLen]byte
	le := binary.LittleEndian
	for _, w := range p.watched {
		if _, err := w.f.ReadAt(buf[:], offPrioLaunch); err != nil {
			continue // truncated under us; the next rescan drops it
		}
		n := len(w.uuid)
		r := regionRef{path: w.path, uuid: w.uuid, high: make([]uint64, n), peer: make([]uint64, n)}
		for i := range n {
			r.high[i] = le.Uint64(buf[8*i:])
			r.peer[i] = le.Uint64(buf[offPeerHigh-offPrioLaunch+8*i:])
		}
		regions = append(regions, r)
		files = append(files, w.f)
	}
	return relay(regions, func(ri, i int, v uint64) error { return writePeerHigh(files[ri], i, v) })
}

// Close closes the regions the Prioritizer keeps open.
func (p *Prioritizer) Close() {
	for _, w := range p.watched {
		w.f.Close()
	}
	p.watched, p.scanned = nil, time.Time{}
}

// rescan replaces the watched regions with the regions now on cards that
// need relaying. Files are opened again, so a region replaced at the same
// path is not missed.
func (p *Prioritizer) rescan() {
	p.Close()
	if p.dirs == nil {
		p.dirs = regionDirs{}
	}
	// File time stamps are the host's: compare them with the host's time.
	// A region libvgpu has not formatted has no launches to relay.
	regions := listRegionsCached(p.CacheDir, p.Pods, p.dirs, time.Now(), false)
	holders := map[string]int{}
	needed := map[string]bool{}
	for _, r := range regions {
		seen := make(map[string]bool, len(r.uuid))
		for i, u := range r.uuid {
			if u == "" {
				continue
			}
			if !seen[u] {
				seen[u] = true
				holders[u]++
			}
			if r.priority == PriorityHigh || (i < len(r.high) && r.high[i] != 0) {
				needed[u] = true
			}
		}
	}
	for _, r := range regions {
		if !slices.ContainsFunc(r.uuid, func(u string) bool { return needed[u] && holders[u] > 1 }) {
			continue
		}
		f, err := openRegion(r.path, os.O_RDWR)
		if err != nil {
			klog.V(2).InfoS("Cannot open a shared region to relay task priority", "file", r.path, "err", err)
			continue
		}
		p.watched = append(p.watched, watchedRegion{path: r.path, f: f, uuid: r.uuid})
	}
}

// relay writes, through write, into every region the newest high-priority
// stamp of the other regions on each of its cards, where it is newer than
// what the region has, and returns how many words it wrote.
func relay(regions []regionRef, write func(region, device int, stamp uint64) error) int {
	// The two newest stamps per card, with the region each came from, so
	// each region gets the newest of the others.
	type top struct {
		first, second uint64
		from          int
	}
	best := make(map[string]*top)
	for ri, r := range regions {
		for i, u := range r.uuid {
			if u == "" || i >= len(r.high) || r.high[i] == 0 {
				continue
			}
			t := best[u]
			if t == nil {
				t = &top{from: -1}
				best[u] = t
			}
			switch s := r.high[i]; {
			case t.from == ri:
				// Two device indexes of one container on one card: keep the newer.
				t.first = max(t.first, s)
			case s > t.first:
				t.second, t.first, t.from = t.first, s, ri
			case s > t.second:
				t.second = s
			}
		}
	}
	written := 0
	for ri, r := range regions {
		for i, u := range r.uuid {
			t := best[u]
			if u == "" || t == nil || i >= len(r.peer) {
				continue
			}
			want := t.first
			if t.from == ri {
				want = t.second
			}
			if want <= r.peer[i] {
				continue // stamps only move forward
			}
			if err := write(ri, i, want); err != nil {
				klog.V(2).InfoS("Cannot relay task priority to a shared region", "file", r.path, "device", i, "err", err)
				continue
			}
			written++
			klog.V(5).InfoS("Relayed high-priority launch", "file", r.path, "device", i, "uuid", u, "stamp", want)
		}
	}
	return written
}

// Run syncs every interval until ctx ends, and closes what it kept open.
// While no card needs relaying it only rescans, every Rescan: an idle agent
// then wakes twice a second instead of twenty times (with 200 agents on two
// cores, the wake-ups alone were a fifth of a core).
func (p *Prioritizer) Run(ctx context.Context, clk clock.Clock, interval time.Duration) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	if p.Clock == nil {
		p.Clock = clk
	}
	defer p.Close()
	for {
		t := clk.NewTimer(p.next(interval))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
			p.Sync()
		}
	}
}

// next is how long Run waits before the next Sync: interval while regions
// are watched, else until the next rescan is due (at least interval).
func (p *Prioritizer) next(interval time.Duration) time.Duration {
	if len(p.watched) > 0 || p.scanned.IsZero() {
		return interval
	}
	return max(interval, p.rescanEvery()-p.Clock.Since(p.scanned))
}

// rescanEvery is Rescan, or DefaultPriorityRescan when it is not set.
func (p *Prioritizer) rescanEvery() time.Duration {
	if p.Rescan <= 0 {
		return DefaultPriorityRescan
	}
	return p.Rescan
}

// writePeerHigh writes device i's peer_high_ns word. The word is 8-byte
// aligned and written in one pwrite; libvgpu ignores a stamp from the
// future, so even a torn value cannot hold a process for long.
func writePeerHigh(f *os.File, i int, v uint64) error {
	if i < 0 || i >= MaxDevices {
		return fmt.Errorf("device index %d outside [0, %d)", i, MaxDevices)
	}
	var word [8]byte
	binary.LittleEndian.PutUint64(word[:], v)
	if _, err := f.WriteAt(word[:], int64(offPeerHigh+8*i)); err != nil {
		return fmt.Errorf("write peer_high_ns[%d] of %s: %w", i, f.Name(), err)
	}
	return nil
}
