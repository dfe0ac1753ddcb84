package monitor

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
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
type Prioritizer struct {
	// CacheDir is the agent's cache directory.
	CacheDir string
	// Pods finds the node's pods; regions of other pods are not read.
	Pods PodByUID
}

// Sync relays the stamps once and returns how many words it wrote.
func (p *Prioritizer) Sync() int {
	regions := listRegions(p.CacheDir, p.Pods)
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
			if err := setPeerHigh(r.path, i, want); err != nil {
				klog.V(2).InfoS("Cannot relay task priority to a shared region", "file", r.path, "device", i, "err", err)
				continue
			}
			written++
			klog.V(5).InfoS("Relayed high-priority launch", "file", r.path, "device", i, "uuid", u, "stamp", want)
		}
	}
	return written
}

// Run syncs every interval until ctx ends.
func (p *Prioritizer) Run(ctx context.Context, clk clock.Clock, interval time.Duration) {
	runEvery(ctx, clk, interval, func() { p.Sync() })
}

// setPeerHigh writes device i's peer_high_ns word. The word is 8-byte
// aligned and written in one pwrite; libvgpu ignores a stamp from the
// future, so even a torn value cannot hold a process for long.
func setPeerHigh(path string, i int, v uint64) error {
	if i < 0 || i >= MaxDevices {
		return fmt.Errorf("device index %d outside [0, %d)", i, MaxDevices)
	}
	f, err := openRegion(path, os.O_RDWR)
	if err != nil {
		return err
	}
	defer f.Close()
	var word [8]byte
	binary.LittleEndian.PutUint64(word[:], v)
	if _, err := f.WriteAt(word[:], int64(offPeerHigh+8*i)); err != nil {
		return fmt.Errorf("write peer_high_ns[%d] of %s: %w", i, path, err)
	}
	return nil
}
