package monitor

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

// The exporter, the utilisation switch and the cleaner work on the layout
// Allocate leaves (containers/ 0700, the container's directory 0755, an
// empty region file 0666 that libvgpu sizes and formats in place), and
// follow none of the symlinks or FIFOs a container could have planted in a
// directory an older agent left writable.
func TestMonitorWorksOnTheAgentsLayout(t *testing.T) {
	srv, err := nvmlmock.New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := nvidia.Discover(srv)
	if err != nil {
		t.Fatal(err)
	}
	inv := nvidia.NewInventory("n1", gpus, config.Default(), nvidia.UnitMiB)
	u := srv.UUIDs()
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, allocate.Indexers())
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-0", UID: "uid-1"}}
	if err := indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	lookup := allocate.IndexerLookup{Indexer: indexer}

	cacheDir := t.TempDir()
	if err := allocate.WritePreload(cacheDir); err != nil {
		t.Fatal(err)
	}
	dir := allocate.ContainerDir(cacheDir, "uid-1", "main")
	if err := os.Mkdir(dir, allocate.ContainerDirMode); err != nil {
		t.Fatal(err)
	}
	region := filepath.Join(dir, "r1.cache")
	if err := os.WriteFile(region, nil, allocate.RegionFileMode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(region, allocate.RegionFileMode); err != nil {
		t.Fatal(err)
	}
	// What a container could have planted: a symlink to a valid region
	// outside the cache directory, and a FIFO.
	victim := filepath.Join(t.TempDir(), "victim.cache")
	regionFile{uuids: []string{u[3]}, memLimit: []uint64{7}, memUsed: []uint64{7}, smLimit: []uint32{7}, smUtil: []uint32{7}}.write(t, victim)
	if err := os.Symlink(victim, filepath.Join(dir, "planted.cache")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.cache"), 0o666); err != nil {
		t.Fatal(err)
	}
	victimBefore, _ := os.ReadFile(victim)

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(srv, func() *nvidia.Inventory { return inv }, lookup, cacheDir))
	switcher := &Switcher{CacheDir: cacheDir, Pods: lookup}
	containerSeries := func() int {
		t.Helper()
		n, err := testutil.GatherAndCount(reg, "vGPU_device_memory_usage_in_bytes")
		if err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Before libvgpu attached: the empty file is no region yet.
	if n := containerSeries(); n != 0 {
		t.Errorf("%d container series before libvgpu formatted the region, want 0", n)
	}
	if n := switcher.Sync(); n != 0 {
		t.Errorf("switcher changed %d words in an empty region", n)
	}

	// libvgpu formats the file in place, through the descriptor it opened.
	formatted := filepath.Join(t.TempDir(), "formatted")
	regionFile{uuids: []string{u[0]}, memLimit: []uint64{2000 << 20}, memUsed: []uint64{1500 << 20},
		smLimit: []uint32{30}, smUtil: []uint32{28}}.write(t, formatted)
	data, err := os.ReadFile(formatted)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(region, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(data, 0); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if n := containerSeries(); n != 1 {
		t.Errorf("%d container series, want 1: the region, not the planted symlink or FIFO", n)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP vGPU_device_memory_limit_in_bytes Device memory limit of the container
# TYPE vGPU_device_memory_limit_in_bytes gauge
vGPU_device_memory_limit_in_bytes{ctrname="main",deviceuuid="`+u[0]+`",podname="train-0",podnamespace="team-a",vdeviceid="0"} 2.097152e+09
`), "vGPU_device_memory_limit_in_bytes"); err != nil {
		t.Error(err)
	}
	if n := switcher.Sync(); n != 1 {
		t.Errorf("switcher changed %d words, want 1 (the container has its card to itself)", n)
	}
	if got := readSwitches(t, region, 1); got[0] != UtilSwitchFree {
		t.Errorf("region's switch = %d, want free", got[0])
	}
	if after, _ := os.ReadFile(victim); string(after) != string(victimBefore) {
		t.Error("the switcher wrote through a planted symlink")
	}
	if fi, err := os.Lstat(region); err != nil || fi.Mode().Perm() != allocate.RegionFileMode {
		t.Errorf("region after use: %v %v, want mode %#o kept", fi, err, allocate.RegionFileMode)
	}

	// The pod goes: its directory is removed, the symlink's target is not.
	if err := indexer.Delete(pod); err != nil {
		t.Fatal(err)
	}
	clk := clocktesting.NewFakeClock(time.Now().Add(time.Hour))
	c := &Cleaner{CacheDir: cacheDir, Pods: lookup, Grace: time.Minute, Clock: clk}
	if n := c.Clean(); n != 1 {
		t.Errorf("Clean removed %d directories, want 1", n)
	}
	if _, err := os.Lstat(dir); !os.IsNotExist(err) {
		t.Errorf("deleted pod's directory still there: %v", err)
	}
	if after, err := os.ReadFile(victim); err != nil || string(after) != string(victimBefore) {
		t.Errorf("the cleaner touched a planted symlink's target: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(cacheDir, allocate.ContainersDir)); err != nil {
		t.Errorf("containers/ removed: %v", err)
	}
}
