package monitor

import (
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

func TestMetricsScrapedOverHTTP(t *testing.T) {
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
	srv.SetMemoryUsed(u[0], 3<<30)
	srv.SetUtilization(u[0], 57, 20)

	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, allocate.Indexers())
	pod := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "train-0", UID: "uid-1"}}
	if err := indexer.Add(pod); err != nil {
		t.Fatal(err)
	}
	cacheDir := t.TempDir()
	regionFile{uuids: []string{u[0]}, memLimit: []uint64{2000 << 20}, memUsed: []uint64{1500 << 20},
		smLimit: []uint32{30}, smUtil: []uint32{28}}.write(t, filepath.Join(allocate.ContainerDir(cacheDir, "uid-1", "main"), "r1.cache"))
	gone := allocate.ContainerDir(cacheDir, "uid-gone", "main")
	regionFile{uuids: []string{u[1]}, memLimit: []uint64{1}, memUsed: []uint64{1}, smLimit: []uint32{1}, smUtil: []uint32{1}}.
		write(t, filepath.Join(gone, "r2.cache"))

	lookup := allocate.IndexerLookup{Indexer: indexer}
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(NewCollector(srv, func() *nvidia.Inventory { return inv }, lookup, cacheDir))
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, "127.0.0.1:0", reg, ready) }()
	addr := <-ready
	resp, err := http.Get("http://" + addr.String() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	labels := `{ctrname="main",deviceuuid="` + u[0] + `",podname="train-0",podnamespace="team-a",vdeviceid="0"}`
	for _, want := range []string{
		`HostGPUMemoryUsage{deviceidx="0",deviceuuid="` + u[0] + `"} 3.221225472e+09`,
		`HostCoreUtilization{deviceidx="0",deviceuuid="` + u[0] + `"} 57`,
		`HostCoreUtilization{deviceidx="7",deviceuuid="` + u[7] + `"} 0`,
		"vGPU_device_memory_usage_in_bytes" + labels + " 1.572864e+09",
		"vGPU_device_memory_limit_in_bytes" + labels + " 2.097152e+09",
		"vGPU_device_sm_utilization_percent" + labels + " 28",
		"vGPU_device_sm_limit_percent" + labels + " 30",
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("scrape lacks %q", want)
		}
	}
	if strings.Contains(string(body), "uid-gone") || strings.Contains(string(body), u[1]+`",podname`) {
		t.Errorf("scrape reports a deleted pod's region")
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve: %v", err)
	}

	// The deleted pod's directory goes once it is older than the grace period.
	clk := clocktesting.NewFakeClock(time.Now())
	c := &Cleaner{CacheDir: cacheDir, Pods: lookup, Grace: time.Hour, Clock: clk}
	if n := c.Clean(); n != 0 {
		t.Errorf("young directory removed (%d)", n)
	}
	clk.Step(2 * time.Hour)
	if n := c.Clean(); n != 1 {
		t.Errorf("Clean removed %d directories, want 1", n)
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("deleted pod's directory still there: %v", err)
	}
	if _, err := os.Stat(allocate.ContainerDir(cacheDir, "uid-1", "main")); err != nil {
		t.Errorf("live pod's directory removed: %v", err)
	}
}
