package monitor

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

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
		n := len(u)
		return regionFile{uuids: u, memLimit: make([]uint64, n), memUsed: make([]uint64, n),
			smLimit: make([]uint32, n), smUtil: make([]uint32, n), high: high}
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

	p := &Prioritizer{CacheDir: cacheDir, Pods: allocate.IndexerLookup{Indexer: indexer}}
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

	// hi dies and its region goes (its stamp only ages in libvgpu); an
	// older stamp never replaces a newer one already relayed.
	if err := os.Remove(hi); err != nil {
		t.Fatal(err)
	}
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
