package monitor

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

func readSwitches(t *testing.T, path string, n int) []uint32 {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint32(buf[offUtilSwitch+4*i:])
	}
	return out
}

// podIndexer is the agent's pod indexer holding pods "ns/<uid>" with the
// given UIDs.
func podIndexer(t testing.TB, uids ...string) cache.Indexer {
	t.Helper()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, allocate.Indexers())
	for _, uid := range uids {
		if err := indexer.Add(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: k8stypes.UID(uid)}}); err != nil {
			t.Fatal(err)
		}
	}
	return indexer
}

func TestSwitcherFreesOnlyCardsAContainerHasToItself(t *testing.T) {
	cacheDir := t.TempDir()
	indexer := podIndexer(t, "uid-a", "uid-b")
	// a holds GPU-0 alone and shares GPU-1 with b; a deleted pod's region
	// on GPU-0 does not count; a region without UUIDs is left alone.
	pathA := filepath.Join(allocate.ContainerDir(cacheDir, "uid-a", "main"), "a.cache")
	pathB := filepath.Join(allocate.ContainerDir(cacheDir, "uid-b", "main"), "b.cache")
	pathGone := filepath.Join(allocate.ContainerDir(cacheDir, "uid-gone", "main"), "g.cache")
	pathBlank := filepath.Join(allocate.ContainerDir(cacheDir, "uid-b", "side"), "s.cache")
	onCards(false, "GPU-0", "GPU-1").write(t, pathA)
	onCards(false, "GPU-1").write(t, pathB)
	onCards(false, "GPU-0").write(t, pathGone)
	onCards(false, "").write(t, pathBlank)

	s := &Switcher{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}}
	if got := s.Sync(); got != 1 {
		t.Errorf("first sync changed %d words, want 1 (a's GPU-0)", got)
	}
	if diff := cmp.Diff([]uint32{UtilSwitchFree, UtilSwitchEnforce}, readSwitches(t, pathA, 2)); diff != "" {
		t.Errorf("a's switches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint32{UtilSwitchEnforce}, readSwitches(t, pathB, 1)); diff != "" {
		t.Errorf("b's switches (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]uint32{UtilSwitchEnforce}, readSwitches(t, pathGone, 1)); diff != "" {
		t.Errorf("a deleted pod's region was written (-want +got):\n%s", diff)
	}
	if got := s.Sync(); got != 0 {
		t.Errorf("an unchanged node changed %d words", got)
	}

	// b moves onto GPU-0 too: a must be throttled there again.
	onCards(false, "GPU-0").write(t, pathB)
	if got := s.Sync(); got != 2 {
		t.Errorf("sync after b moved changed %d words, want 2", got)
	}
	if diff := cmp.Diff([]uint32{UtilSwitchEnforce, UtilSwitchFree}, readSwitches(t, pathA, 2)); diff != "" {
		t.Errorf("a's switches after b moved (-want +got):\n%s", diff)
	}
}

// A high-priority container sharing its card only with low-priority ones
// runs unthrottled (they yield to it); two high-priority ones share by
// their SM limits, and the low-priority ones are always limited.
func TestSwitcherFreesHighPriorityAmongLowOnes(t *testing.T) {
	cacheDir := t.TempDir()
	indexer := podIndexer(t, "uid-hi", "uid-lo", "uid-hi2")
	hi := filepath.Join(allocate.ContainerDir(cacheDir, "uid-hi", "main"), "h.cache")
	lo := filepath.Join(allocate.ContainerDir(cacheDir, "uid-lo", "main"), "l.cache")
	hi2 := filepath.Join(allocate.ContainerDir(cacheDir, "uid-hi2", "main"), "h2.cache")
	onCards(true, "GPU-0").write(t, hi)
	onCards(false, "GPU-0").write(t, lo)
	s := &Switcher{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}}
	s.Sync()
	if diff := cmp.Diff([][]uint32{{UtilSwitchFree}, {UtilSwitchEnforce}}, [][]uint32{readSwitches(t, hi, 1), readSwitches(t, lo, 1)}); diff != "" {
		t.Errorf("high and low on one card: switches [high, low] (-want +got):\n%s", diff)
	}
	onCards(true, "GPU-0").write(t, hi2)
	s.Sync()
	if diff := cmp.Diff([][]uint32{{UtilSwitchEnforce}, {UtilSwitchEnforce}, {UtilSwitchEnforce}},
		[][]uint32{readSwitches(t, hi, 1), readSwitches(t, lo, 1), readSwitches(t, hi2, 1)}); diff != "" {
		t.Errorf("two high and one low on one card: switches [hi, lo, hi2] (-want +got):\n%s", diff)
	}
}

// listRegionsCached lists a container directory again only when its
// modification time moved, or when the last listing was too close to it to
// be trusted on a file system with coarse time stamps; a file the agent
// created but libvgpu has not formatted yet is skipped and found once
// formatted in place.
func TestListRegionsCached(t *testing.T) {
	cacheDir := t.TempDir()
	pods := allocate.IndexerLookup{Indexer: podIndexer(t, "uid-a")}
	dir := allocate.ContainerDir(cacheDir, "uid-a", "main")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	first := filepath.Join(dir, "one.cache")
	if err := os.WriteFile(first, nil, 0o600); err != nil { // as the agent creates it
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Minute)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	dirs := regionDirs{}
	if got := listRegionsCached(cacheDir, pods, dirs, time.Now(), false); len(got) != 0 {
		t.Fatalf("unformatted file listed as a region: %+v", got)
	}
	if c := dirs[dir]; len(c.files) != 1 {
		t.Fatalf("cached listing %+v, want the one file", c)
	}
	// libvgpu formats it in place: the directory does not change, the
	// cached listing is used, and the region is read.
	onCards(false, "GPU-0").write(t, first)
	if err := os.Chtimes(dir, old, old); err != nil {
		t.Fatal(err)
	}
	if got := listRegionsCached(cacheDir, pods, dirs, time.Now(), false); len(got) != 1 || got[0].uuid[0] != "GPU-0" {
		t.Fatalf("after formatting: %+v, want the region on GPU-0", got)
	}
	// The cached listing is what is used while the directory is unchanged.
	dirs[dir] = regionDir{mtime: dirs[dir].mtime, listed: dirs[dir].listed}
	if got := listRegionsCached(cacheDir, pods, dirs, time.Now(), false); len(got) != 0 {
		t.Fatalf("an unchanged directory was listed again: %+v", got)
	}
	// A new file moves the directory's time: listed again.
	second := filepath.Join(dir, "two.cache")
	onCards(false, "GPU-1").write(t, second)
	if got := listRegionsCached(cacheDir, pods, dirs, time.Now(), false); len(got) != 2 {
		t.Fatalf("after a new file: %d regions, want 2", len(got))
	}
	// A listing taken right after the directory changed is not trusted, even
	// if a later file leaves the same (coarse) time stamp.
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	third := filepath.Join(dir, "three.cache")
	onCards(false, "GPU-2").write(t, third)
	if err := os.Chtimes(dir, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	if got := listRegionsCached(cacheDir, pods, dirs, time.Now(), false); len(got) != 3 {
		t.Fatalf("a file created in the same time stamp: %d regions, want 3", len(got))
	}
	// A pod's directory that goes is forgotten.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	listRegionsCached(cacheDir, pods, dirs, time.Now(), false)
	if len(dirs) != 0 {
		t.Errorf("listings kept for a removed directory: %v", dirs)
	}
}

// A container counts on its cards from its Allocate on, through the cards
// file the agent writes beside its region (allocate.CardsFile), before
// libvgpu formats the region: the container that had the card to itself is
// throttled again before its neighbour starts, whatever the neighbour's
// priority turns out to be. The unformatted region is not written.
func TestSwitcherCountsAContainerFromItsAllocate(t *testing.T) {
	cacheDir := t.TempDir()
	indexer := podIndexer(t, "uid-a", "uid-b")
	s := &Switcher{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}}
	pathA := filepath.Join(allocate.ContainerDir(cacheDir, "uid-a", "main"), "a.cache")
	onCards(true, "GPU-0").write(t, pathA)
	if got := s.Sync(); got != 1 || readSwitches(t, pathA, 1)[0] != UtilSwitchFree {
		t.Fatalf("a alone on GPU-0: %d words changed, switch %v; want a freed", got, readSwitches(t, pathA, 1))
	}

	// b is allocated GPU-1 and GPU-0: an empty region and its cards file.
	dirB := allocate.ContainerDir(cacheDir, "uid-b", "main")
	if err := os.MkdirAll(dirB, 0o755); err != nil {
		t.Fatal(err)
	}
	pathB := filepath.Join(dirB, "b.cache")
	cardsB := filepath.Join(dirB, allocate.CardsFile("b.cache"))
	if err := os.WriteFile(pathB, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cardsB, []byte("GPU-1\nGPU-0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := s.Sync(); got != 1 || readSwitches(t, pathA, 1)[0] != UtilSwitchEnforce {
		t.Errorf("b allocated on GPU-0: %d words changed, a's switch %v; want a throttled", got, readSwitches(t, pathA, 1))
	}
	if fi, err := os.Stat(pathB); err != nil || fi.Size() != 0 {
		t.Errorf("b's unformatted region was written: %v %v", fi, err)
	}

	// What is not a cards file the agent wrote counts for nothing.
	for _, tc := range []struct {
		name  string
		plant func()
	}{
		{"symlink", func() { symlinkTo(t, cardsB, filepath.Join(t.TempDir(), "x")) }},
		{"too long", func() { writeFile(t, cardsB, strings.Repeat("GPU-0\n", maxCardsFile)) }},
		{"too many", func() { writeFile(t, cardsB, strings.Repeat("GPU-0\n", MaxDevices+1)) }},
		{"no cards", func() { writeFile(t, cardsB, "\n") }},
		{"directory", func() { mkdirAt(t, cardsB) }},
	} {
		if err := os.RemoveAll(cardsB); err != nil {
			t.Fatal(err)
		}
		tc.plant()
		if s.Sync(); readSwitches(t, pathA, 1)[0] != UtilSwitchFree {
			t.Errorf("cards file %s: a's switch %v, want a freed", tc.name, readSwitches(t, pathA, 1))
		}
	}

	// b's pod is gone: its cards no longer count.
	if err := os.RemoveAll(cardsB); err != nil {
		t.Fatal(err)
	}
	writeFile(t, cardsB, "GPU-0\n")
	if s.Sync(); readSwitches(t, pathA, 1)[0] != UtilSwitchEnforce {
		t.Fatalf("b allocated on GPU-0 again: a's switch %v, want a throttled", readSwitches(t, pathA, 1))
	}
	if err := indexer.Delete(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "uid-b"}}); err != nil {
		t.Fatal(err)
	}
	if got := s.Sync(); got != 1 || readSwitches(t, pathA, 1)[0] != UtilSwitchFree {
		t.Errorf("b's pod deleted: %d words changed, a's switch %v; want a freed", got, readSwitches(t, pathA, 1))
	}
}

// Run syncs when kicked, without waiting for its interval.
func TestSwitcherRunsWhenKicked(t *testing.T) {
	cacheDir := t.TempDir()
	s := &Switcher{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: podIndexer(t, "uid-a")}}
	path := filepath.Join(allocate.ContainerDir(cacheDir, "uid-a", "main"), "a.cache")
	onCards(false, "GPU-0").write(t, path)
	clk := clocktesting.NewFakeClock(time.Now())
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); s.Run(ctx, clk, time.Hour) }()
	defer func() { cancel(); <-done }()
	for !clk.HasWaiters() {
		time.Sleep(time.Millisecond)
	}
	if got := readSwitches(t, path, 1)[0]; got != UtilSwitchEnforce {
		t.Fatalf("switch %v before any sync", got)
	}
	s.Kick()
	deadline := time.Now().Add(10 * time.Second)
	for readSwitches(t, path, 1)[0] != UtilSwitchFree {
		if time.Now().After(deadline) {
			t.Fatal("a kick did not sync (the fake clock never moved)")
		}
		time.Sleep(time.Millisecond)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func symlinkTo(t *testing.T, link, target string) {
	t.Helper()
	writeFile(t, target, "GPU-0\n")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

func mkdirAt(t *testing.T, path string) {
	t.Helper()
	if err := os.Mkdir(path, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A container counts once on a card however many regions its directory
// holds (an Allocate that failed after creating its region and was retried
// leaves one behind), as its formatted region says; a pod that finished
// (a completed Job's pods stay until deleted) counts for nothing.
func TestSwitcherCountsContainersNotFiles(t *testing.T) {
	cacheDir := t.TempDir()
	indexer := podIndexer(t, "uid-a", "uid-b")
	s := &Switcher{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}}
	dirA := allocate.ContainerDir(cacheDir, "uid-a", "main")
	pathA := filepath.Join(dirA, "a2.cache")
	onCards(false, "GPU-0").write(t, pathA)
	// The first Allocate's region, never formatted, names the same card
	// and sorts first (unformatted, it would count as high priority).
	writeFile(t, filepath.Join(dirA, "a1.cache"), "")
	writeFile(t, filepath.Join(dirA, allocate.CardsFile("a1.cache")), "GPU-0\n")
	if s.Sync(); readSwitches(t, pathA, 1)[0] != UtilSwitchFree {
		t.Errorf("a alone with a leftover region of its own: switch %v, want freed", readSwitches(t, pathA, 1))
	}

	// b on GPU-0, high priority: b, the card's only high one, is free;
	// a (low, whatever its leftover region) is throttled.
	pathB := filepath.Join(allocate.ContainerDir(cacheDir, "uid-b", "main"), "b.cache")
	onCards(true, "GPU-0").write(t, pathB)
	s.Sync()
	if diff := cmp.Diff([][]uint32{{UtilSwitchEnforce}, {UtilSwitchFree}},
		[][]uint32{readSwitches(t, pathA, 1), readSwitches(t, pathB, 1)}); diff != "" {
		t.Errorf("low a beside high b: switches [a, b] (-want +got):\n%s", diff)
	}
	// b's pod has finished: b is no neighbour.
	for _, phase := range []v1.PodPhase{v1.PodSucceeded, v1.PodFailed} {
		setPhase(t, indexer, "uid-b", v1.PodRunning)
		if s.Sync(); readSwitches(t, pathA, 1)[0] != UtilSwitchEnforce {
			t.Fatalf("b running beside a: a's switch %v, want throttled", readSwitches(t, pathA, 1))
		}
		setPhase(t, indexer, "uid-b", phase)
		if s.Sync(); readSwitches(t, pathA, 1)[0] != UtilSwitchFree {
			t.Errorf("b %s: a's switch %v, want freed", phase, readSwitches(t, pathA, 1))
		}
	}
}

func setPhase(t *testing.T, indexer cache.Indexer, uid string, phase v1.PodPhase) {
	t.Helper()
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: uid, UID: k8stypes.UID(uid)},
		Status: v1.PodStatus{Phase: phase}}
	if err := indexer.Update(pod); err != nil {
		t.Fatal(err)
	}
}
