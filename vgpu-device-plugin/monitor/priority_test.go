package monitor

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

func readPeers(t *testing.T, path string, n int) []uint64 {
	t.Helper()
	buf, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]uint64, n)
	for i := range out {
		out[i] = binary.LittleEndian.Uint64(buf[offPeerHigh+8*i:])
	}
	return out
}

// Every region on a card gets the newest high-priority stamp of the other
// regions on that card: never its own, never one from another card, never
// one of a deleted pod; and a stamp only moves forward.
func TestPrioritizerRelaysNewestOtherStamp(t *testing.T) {
	cacheDir := t.TempDir()
	indexer := podIndexer(t, "uid-hi", "uid-lo", "uid-hi2")
	region := func(high []uint64, u ...string) regionFile {
		r := onCards(false, u...)
		r.high = high
		return r
	}
	path := func(uid, name string) string {
		return filepath.Join(allocate.ContainerDir(cacheDir, uid, "main"), name+".cache")
	}
	// hi launches on GPU-0 (stamp 500); hi2 on GPU-0 (300) and GPU-1 (900);
	// lo holds GPU-0 and GPU-1 and never launched at high priority; a
	// deleted pod's stamp (9999) on GPU-0 is not relayed.
	hi, hi2, lo, gone := path("uid-hi", "h"), path("uid-hi2", "h2"), path("uid-lo", "l"), path("uid-gone", "g")
	region([]uint64{500}, "GPU-0").write(t, hi)
	region([]uint64{300, 900}, "GPU-0", "GPU-1").write(t, hi2)
	region(nil, "GPU-0", "GPU-1").write(t, lo)
	region([]uint64{9999}, "GPU-0").write(t, gone)

	clk := clocktesting.NewFakeClock(time.Now())
	p := &Prioritizer{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}, Clock: clk}
	defer p.Close()
	if got := p.Sync(); got != 4 {
		t.Errorf("first sync wrote %d words, want 4 (lo twice, hi, hi2 on GPU-0)", got)
	}
	for _, tc := range []struct {
		name, path string
		want       []uint64
	}{
		{"lo", lo, []uint64{500, 900}},
		{"hi (sees hi2 on GPU-0)", hi, []uint64{300}},
		{"hi2 (sees hi on GPU-0, nobody else on GPU-1)", hi2, []uint64{500, 0}},
		{"deleted pod", gone, []uint64{0}},
	} {
		if diff := cmp.Diff(tc.want, readPeers(t, tc.path, len(tc.want))); diff != "" {
			t.Errorf("%s: peer_high_ns (-want +got):\n%s", tc.name, diff)
		}
	}
	if got := p.Sync(); got != 0 {
		t.Errorf("an unchanged node wrote %d words", got)
	}

	// hi dies and its region goes (its stamp only ages in libvgpu), seen
	// at the next rescan; an older stamp never replaces a newer one
	// already relayed.
	if err := os.Remove(hi); err != nil {
		t.Fatal(err)
	}
	clk.Step(DefaultPriorityRescan)
	if got := p.Sync(); got != 0 {
		t.Errorf("sync after hi left wrote %d words, want 0", got)
	}
	if diff := cmp.Diff([]uint64{500, 900}, readPeers(t, lo, 2)); diff != "" {
		t.Errorf("lo after hi left (-want +got):\n%s", diff)
	}
	// hi2 launches again on GPU-0: lo and nobody else sees it.
	region([]uint64{1200, 900}, "GPU-0", "GPU-1").write(t, hi2)
	if got := p.Sync(); got != 1 {
		t.Errorf("sync after hi2 launched wrote %d words, want 1", got)
	}
	if diff := cmp.Diff([]uint64{1200, 900}, readPeers(t, lo, 2)); diff != "" {
		t.Errorf("lo after hi2 launched (-want +got):\n%s", diff)
	}
}

// Between rescans the Prioritizer reads and writes only the regions it keeps
// open: new stamps in them are relayed at once, a region that appears is
// found at the next rescan, and a node whose cards need no relaying (no
// high-priority region sharing a card) keeps nothing open and writes
// nothing.
func TestPrioritizerRescans(t *testing.T) {
	cacheDir := t.TempDir()
	indexer := podIndexer(t, "uid-hi", "uid-lo", "uid-lo2", "uid-new")
	path := func(uid string) string {
		return filepath.Join(allocate.ContainerDir(cacheDir, uid, "main"), "r.cache")
	}
	region := func(highPrio bool, high []uint64, u ...string) regionFile {
		r := onCards(highPrio, u...)
		r.high = high
		return r
	}
	// Only low-priority containers: nothing to relay, nothing kept open.
	lo, lo2 := path("uid-lo"), path("uid-lo2")
	region(false, nil, "GPU-0").write(t, lo)
	region(false, nil, "GPU-0").write(t, lo2)
	clk := clocktesting.NewFakeClock(time.Now())
	p := &Prioritizer{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}, Clock: clk, Rescan: time.Second}
	defer p.Close()
	if got := p.Sync(); got != 0 || len(p.watched) != 0 {
		t.Fatalf("low-priority node: wrote %d words, keeps %d regions open; want 0, 0", got, len(p.watched))
	}

	// A high-priority container starts on GPU-0 (not launched yet): found
	// at the next rescan, not before.
	hi := path("uid-hi")
	region(true, nil, "GPU-0").write(t, hi)
	clk.Step(999 * time.Millisecond)
	if p.Sync(); len(p.watched) != 0 {
		t.Fatalf("before the rescan: %d regions open, want 0", len(p.watched))
	}
	clk.Step(time.Millisecond)
	if got := p.Sync(); got != 0 || len(p.watched) != 3 {
		t.Fatalf("at the rescan: wrote %d words, keeps %d regions open; want 0, 3", got, len(p.watched))
	}
	// It launches (libvgpu stamps in place): relayed at the next pass,
	// without a rescan, to both neighbours.
	stamp := func(path string, v uint64) {
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], v)
		if _, err := f.WriteAt(b[:], offPrioLaunch); err != nil {
			t.Fatal(err)
		}
	}
	stamp(hi, 700)
	if got := p.Sync(); got != 2 {
		t.Errorf("after the launch: wrote %d words, want 2", got)
	}
	for _, f := range []string{lo, lo2} {
		if diff := cmp.Diff([]uint64{700}, readPeers(t, f, 1)); diff != "" {
			t.Errorf("%s peer_high_ns (-want +got):\n%s", f, diff)
		}
	}
	// A container on another card alone is never opened.
	region(false, nil, "GPU-1").write(t, path("uid-new"))
	clk.Step(time.Second)
	if p.Sync(); len(p.watched) != 3 {
		t.Errorf("a lone container on GPU-1: %d regions open, want 3", len(p.watched))
	}
	p.Close()
	if len(p.watched) != 0 {
		t.Errorf("after Close: %d regions open", len(p.watched))
	}
}

// BenchmarkPrioritizerSync is one 50 ms pass on a node with ten containers
// started a while ago, two of them on a card with a high-priority one:
// between rescans (what nearly every pass is) against a rescan on every
// pass (about what the agent did before the Prioritizer kept regions open
// and its directory listings).
func BenchmarkPrioritizerSync(b *testing.B) {
	cacheDir := b.TempDir()
	uids := make([]string, 10)
	for i := range uids {
		uids[i] = fmt.Sprintf("uid-%d", i)
	}
	indexer := podIndexer(b, uids...)
	for i, uid := range uids {
		u := fmt.Sprintf("GPU-%d", i%8)
		onCards(i == 0, u).write(b, filepath.Join(allocate.ContainerDir(cacheDir, uid, "main"), "r.cache"))
		// A node in its steady state: containers started a while ago.
		old := time.Now().Add(-time.Minute)
		if err := os.Chtimes(allocate.ContainerDir(cacheDir, uid, "main"), old, old); err != nil {
			b.Fatal(err)
		}
	}
	for _, bc := range []struct {
		name   string
		rescan time.Duration
	}{{"between-rescans", time.Hour}, {"rescan-every-pass", time.Nanosecond}} {
		b.Run(bc.name, func(b *testing.B) {
			clk := clocktesting.NewFakeClock(time.Now())
			p := &Prioritizer{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}, Clock: clk, Rescan: bc.rescan}
			defer p.Close()
			p.Sync()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				clk.Step(time.Millisecond)
				p.Sync()
			}
		})
	}
}

// Run passes at the relay interval only while a card needs relaying; with
// nothing watched it waits for the next rescan.
func TestPrioritizerNext(t *testing.T) {
	cacheDir := t.TempDir()
	indexer := podIndexer(t, "uid-hi", "uid-lo")
	clk := clocktesting.NewFakeClock(time.Now())
	p := &Prioritizer{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}, Clock: clk, Rescan: 500 * time.Millisecond}
	defer p.Close()
	const interval = 50 * time.Millisecond
	if got := p.next(interval); got != interval {
		t.Errorf("before the first scan: %v, want %v", got, interval)
	}
	p.Sync()
	clk.Step(100 * time.Millisecond)
	if got := p.next(interval); got != 400*time.Millisecond {
		t.Errorf("nothing watched, 100ms after the scan: %v, want 400ms", got)
	}
	clk.Step(time.Second)
	if got := p.next(interval); got != interval {
		t.Errorf("rescan overdue: %v, want %v", got, interval)
	}
	for _, uid := range []string{"uid-hi", "uid-lo"} {
		onCards(uid == "uid-hi", "GPU-0").
			write(t, filepath.Join(allocate.ContainerDir(cacheDir, uid, "main"), "r.cache"))
	}
	p.Sync()
	if got := p.next(interval); got != interval || len(p.watched) != 2 {
		t.Errorf("two regions watched: next %v with %d open, want %v with 2", got, len(p.watched), interval)
	}
}
