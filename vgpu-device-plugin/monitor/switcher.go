package monitor

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// Values of a region's util_switch word (libvgpu/include/vgpu_region.h).
const (
	// UtilSwitchEnforce keeps libvgpu's SM limit in force (the default).
	UtilSwitchEnforce = uint32(0)
	// UtilSwitchFree lets a container run unthrottled: it is alone on the
	// card, so its SM share would only leave the card idle.
	UtilSwitchFree = uint32(1)
)

// DefaultSwitchInterval is how often the Switcher looks at the regions.
const DefaultSwitchInterval = 5 * time.Second

// Switcher sets the utilisation switch in the shared regions of the node's
// containers: free for a card a container has to itself, enforced for a card
// that two or more containers of pods on the node hold. A container whose
// region does not exist yet (it has not started CUDA) is not seen; the next
// pass enforces the limit again once it appears. Regions without device
// UUIDs (no NVML in the container) are left alone. libvgpu ignores the
// switch under GPU_CORE_UTILIZATION_POLICY=force.
type Switcher struct {
	// CacheDir is the agent's cache directory.
	CacheDir string
	// Pods finds the node's pods; regions of other pods are not counted.
	Pods PodByUID
}

type regionRef struct {
	path string
	uuid []string
	// Task priority: the region's CUDA_TASK_PRIORITY and its stamps per
	// device index (priority.go).
	priority   int32
	high, peer []uint64
}

// Sync sets every region's switches once and returns how many words it
// changed.
//
// With task priority (priority.go) a high-priority container (the region's
// priority 0) counts only the high-priority holders of its card: its
// low-priority neighbours hold their launches while it is launching, so
// its SM share would only leave the card idle, as HAMi lifts the limit of a
// task no higher or equal priority competes with (cmd/vGPUmonitor/
// feedback.go, CheckPriority). A low-priority container counts everyone.
func (s *Switcher) Sync() int {
	regions := s.regions()
	holders := make(map[string]int)
	highs := make(map[string]int)
	for _, r := range regions {
		seen := make(map[string]bool, len(r.uuid))
		for _, u := range r.uuid {
			if u != "" && !seen[u] {
				seen[u] = true
				holders[u]++
				if r.priority == PriorityHigh {
					highs[u]++
				}
			}
		}
	}
	changed := 0
	for _, r := range regions {
		for i, u := range r.uuid {
			if u == "" {
				continue
			}
			want := UtilSwitchEnforce
			if holders[u] == 1 || (r.priority == PriorityHigh && highs[u] == 1) {
				want = UtilSwitchFree
			}
			ok, err := setSwitch(r.path, i, want)
			if err != nil {
				klog.V(2).InfoS("Cannot set a shared region's utilisation switch", "file", r.path, "device", i, "err", err)
				continue
			}
			if ok {
				changed++
				klog.V(4).InfoS("Set utilisation switch", "file", r.path, "device", i, "uuid", u, "free", want == UtilSwitchFree)
			}
		}
	}
	return changed
}

// regions lists the readable regions of pods on the node.
func (s *Switcher) regions() []regionRef { return listRegions(s.CacheDir, s.Pods) }

// listRegions lists the readable regions of pods on the node under cacheDir.
func listRegions(cacheDir string, pods PodByUID) []regionRef {
	return listRegionsCached(cacheDir, pods, nil, time.Time{})
}

// regionDirs remembers, per container directory, the region files it held
// when last listed, so a directory whose modification time has not moved
// since is not listed again (the Prioritizer's rescans: the agent adds a
// region file to a container's directory at Allocate, libvgpu formats it
// in place).
type regionDirs map[string]regionDir

type regionDir struct {
	mtime, listed time.Time
	files         []string
}

// mtimeSlack covers file systems whose time stamps are coarse: a listing
// taken less than this after the directory's modification time may have
// missed a file created in the same tick, so it is not trusted.
const mtimeSlack = 2 * time.Second

// listRegionsCached is listRegions, reusing dirs' listings (when dirs is
// not nil; it is updated, and forgets directories no longer listed) and
// skipping files too short to hold a header (created by the agent, not
// yet formatted by libvgpu) without opening them.
func listRegionsCached(cacheDir string, pods PodByUID, dirs regionDirs, now time.Time) []regionRef {
	root := filepath.Join(cacheDir, allocate.ContainersDir)
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil
	}
	seen := make(map[string]bool, len(entries))
	var out []regionRef
	for _, d := range entries {
		uid, _, ok := strings.Cut(d.Name(), "_")
		if !d.IsDir() || !ok {
			continue
		}
		if _, found := pods.ByUID(uid); !found {
			continue
		}
		dir := filepath.Join(root, d.Name())
		seen[dir] = true
		for _, f := range regionFiles(dir, dirs, now) {
			if fi, err := os.Lstat(f); err != nil || !fi.Mode().IsRegular() || fi.Size() < HeaderSize {
				continue
			}
			r, err := ReadRegion(f)
			if err != nil {
				continue
			}
			out = append(out, regionRef{path: f, uuid: r.UUID, priority: r.Priority, high: r.HighLaunch, peer: r.PeerHigh})
		}
	}
	for dir := range dirs {
		if !seen[dir] {
			delete(dirs, dir)
		}
	}
	return out
}

// regionFiles lists dir's *.cache files, from dirs when its listing is
// still good.
func regionFiles(dir string, dirs regionDirs, now time.Time) []string {
	if dirs == nil {
		files, _ := filepath.Glob(filepath.Join(dir, "*.cache"))
		return files
	}
	fi, err := os.Stat(dir)
	if err != nil {
		delete(dirs, dir)
		return nil
	}
	if c, ok := dirs[dir]; ok && fi.ModTime().Equal(c.mtime) && c.listed.Sub(c.mtime) > mtimeSlack {
		return c.files
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.cache"))
	dirs[dir] = regionDir{mtime: fi.ModTime(), listed: now, files: files}
	return files
}

// setSwitch writes device i's switch word if it differs and reports whether
// it wrote. The word is 4-byte aligned, so libvgpu's atomic loads see either
// value, never a torn one.
func setSwitch(path string, i int, want uint32) (bool, error) {
	if i < 0 || i >= MaxDevices {
		return false, fmt.Errorf("device index %d outside [0, %d)", i, MaxDevices)
	}
	f, err := openRegion(path, os.O_RDWR)
	if err != nil {
		return false, err
	}
	defer f.Close()
	off := int64(offUtilSwitch + 4*i)
	var word [4]byte
	if _, err := f.ReadAt(word[:], off); err != nil {
		return false, fmt.Errorf("read util_switch[%d] of %s: %w", i, path, err)
	}
	if binary.LittleEndian.Uint32(word[:]) == want {
		return false, nil
	}
	binary.LittleEndian.PutUint32(word[:], want)
	if _, err := f.WriteAt(word[:], off); err != nil {
		return false, fmt.Errorf("write util_switch[%d] of %s: %w", i, path, err)
	}
	return true, nil
}

// Run syncs every interval until ctx ends.
func (s *Switcher) Run(ctx context.Context, clk clock.Clock, interval time.Duration) {
	runEvery(ctx, clk, interval, func() { s.Sync() })
}
