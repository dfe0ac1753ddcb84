package monitor

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	v1 "k8s.io/api/core/v1"
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
// that two or more containers of pods on the node hold. A container counts
// as a holder from its Allocate on: until libvgpu has formatted its region
// (it has not started CUDA yet, or never will) the cards file the agent
// wrote beside the region (allocate.CardsFile) names its cards. So a
// container that ran alone is throttled again as soon as a neighbour is
// allocated (Kick), before the neighbour starts, and a neighbour that never
// starts CUDA keeps it throttled: the switch fails closed. A container
// counts once per card whatever number of regions its directory holds, and
// pods that have finished (Succeeded, Failed) not at all. Regions without
// device UUIDs (no NVML in the container) are left alone. libvgpu ignores
// the switch under GPU_CORE_UTILIZATION_POLICY=force.
type Switcher struct {
	// CacheDir is the agent's cache directory.
	CacheDir string
	// Pods finds the node's pods; regions of other pods are not counted.
	Pods PodByUID

	kickOnce sync.Once
	kicks    chan struct{}
}

// Kick makes Run sync now rather than at its next interval. It never
// blocks; kicks while a sync is due are merged.
func (s *Switcher) Kick() {
	select {
	case s.kickChan() <- struct{}{}:
	default:
	}
}

func (s *Switcher) kickChan() chan struct{} {
	s.kickOnce.Do(func() { s.kicks = make(chan struct{}, 1) })
	return s.kicks
}

type regionRef struct {
	path string
	uuid []string
	// Task priority: the region's CUDA_TASK_PRIORITY and its stamps per
	// device index (priority.go).
	priority   int32
	high, peer []uint64
	// pending: the region is not readable yet (libvgpu has not formatted
	// it); uuid comes from its cards file and nothing else is known.
	pending bool
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
	// A container counts once per card, however many regions its
	// directory holds (a failed Allocate retried leaves one behind), and
	// as what its formatted region says when it has one.
	slices.SortStableFunc(regions, func(a, b regionRef) int {
		if a.pending == b.pending {
			return 0
		}
		if b.pending {
			return -1
		}
		return 1
	})
	seen := make(map[[2]string]bool)
	for _, r := range regions {
		dir := filepath.Dir(r.path)
		for _, u := range r.uuid {
			if k := [2]string{dir, u}; u != "" && !seen[k] {
				seen[k] = true
				holders[u]++
				// A pending container's priority is not known yet: it
				// counts as high, so it keeps a high one throttled too.
				if r.priority == PriorityHigh || r.pending {
					highs[u]++
				}
			}
		}
	}
	changed := 0
	for _, r := range regions {
		if r.pending {
			continue // nothing to switch in a region libvgpu has not formatted
		}
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

// regions lists the regions of pods on the node, and the pending ones
// (unformatted, with a cards file).
func (s *Switcher) regions() []regionRef {
	return listRegionsCached(s.CacheDir, s.Pods, nil, time.Time{}, true)
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

// listRegionsCached lists the readable regions of running pods on the
// node under cacheDir, reusing dirs' listings (when dirs is not nil; it is
// updated, and forgets directories no longer listed). A region libvgpu has
// not formatted yet is listed as pending, with the cards its cards file
// names, only when pending is set; otherwise it is skipped, and a file too
// short to hold a header (created by the agent) without opening anything.
func listRegionsCached(cacheDir string, pods PodByUID, dirs regionDirs, now time.Time, pending bool) []regionRef {
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
		pod, found := pods.ByUID(uid)
		if !found || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
			continue // its containers no longer run (a finished Job's pods stay until deleted)
		}
		dir := filepath.Join(root, d.Name())
		seen[dir] = true
		for _, f := range regionFiles(dir, dirs, now) {
			fi, err := os.Lstat(f)
			if err != nil || !fi.Mode().IsRegular() {
				continue
			}
			var r *Region
			if fi.Size() >= HeaderSize {
				r, err = ReadRegion(f)
			}
			if r == nil || err != nil {
				if !pending {
					continue
				}
				if cards := readCards(f); len(cards) > 0 {
					out = append(out, regionRef{path: f, uuid: cards, pending: true})
				}
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

// maxCardsFile bounds what readCards reads: the agent writes at most
// MaxDevices UUIDs of well under 100 bytes.
const maxCardsFile = MaxDevices * 128

// readCards returns the cards the agent wrote beside region at Allocate
// (allocate.CardsFile), nil if there is no such file or it is not one the
// agent wrote (not a regular file, too long).
func readCards(region string) []string {
	path := filepath.Join(filepath.Dir(region), allocate.CardsFile(filepath.Base(region)))
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxCardsFile {
		return nil
	}
	b, err := io.ReadAll(io.LimitReader(f, maxCardsFile))
	if err != nil {
		return nil
	}
	var cards []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			cards = append(cards, line)
		}
	}
	if len(cards) > MaxDevices {
		return nil
	}
	return cards
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

// Run syncs every interval, and at once when kicked (Kick), until ctx ends.
func (s *Switcher) Run(ctx context.Context, clk clock.Clock, interval time.Duration) {
	runEvery(ctx, clk, interval, s.kickChan(), func() { s.Sync() })
}
