package monitor

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// DefaultCleanGrace is how old a directory of a pod no longer on the node
// must be before it is removed.
const DefaultCleanGrace = 5 * time.Minute

// Cleaner removes the shared-region directories of pods that left the node.
type Cleaner struct {
	// CacheDir is the agent's cache directory.
	CacheDir string
	// Pods finds the node's pods; it must be synced before Clean runs.
	Pods PodByUID
	// Grace protects directories younger than it; 0 means DefaultCleanGrace.
	Grace time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Clean removes the stale directories once and returns how many it removed.
func (c *Cleaner) Clean() int {
	grace := c.Grace
	if grace == 0 {
		grace = DefaultCleanGrace
	}
	clk := c.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	root := filepath.Join(c.CacheDir, allocate.ContainersDir)
	dirs, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	removed := 0
	for _, d := range dirs {
		uid, _, ok := strings.Cut(d.Name(), "_")
		if !d.IsDir() || !ok {
			continue
		}
		if _, found := c.Pods.ByUID(uid); found {
			continue
		}
		info, err := d.Info()
		if err != nil || clk.Since(info.ModTime()) < grace {
			continue
		}
		path := filepath.Join(root, d.Name())
		if err := os.RemoveAll(path); err != nil {
			klog.ErrorS(err, "Cannot remove a deleted pod's shared region", "dir", path)
			continue
		}
		klog.V(2).InfoS("Removed a deleted pod's shared region", "dir", path)
		removed++
	}
	return removed
}

// Run cleans every interval until ctx ends.
func (c *Cleaner) Run(ctx context.Context, interval time.Duration) {
	runEvery(ctx, c.Clock, interval, nil, func() { c.Clean() })
}

// runEvery calls f every interval, timed by clk (the real clock when nil),
// and at once on every receive from kicks (nil: never), until ctx ends: the
// loop of the cleaner, the utilisation switch and the priority relay.
func runEvery(ctx context.Context, clk clock.Clock, interval time.Duration, kicks <-chan struct{}, f func()) {
	if clk == nil {
		clk = clock.RealClock{}
	}
	for {
		t := clk.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		case <-kicks:
			t.Stop()
		}
		f()
	}
}
