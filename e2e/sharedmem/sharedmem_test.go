package sharedmem

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

const (
	gib   = uint64(1) << 30
	limit = gib // each case's container limit (CUDA_DEVICE_MEMORY_LIMIT)
)

// lib is libvgpu's directory in the module.
var lib string

func TestMain(m *testing.M) {
	root, err := filepath.Abs("../..")
	if err == nil {
		lib = filepath.Join(root, "libvgpu")
		out, mkErr := exec.Command("make", "-s", "-C", lib, "libvgpu.so", "build/stub/libcuda.so.1",
			"build/stub/libnvidia-ml.so.1", "build/vgpu_test").CombinedOutput()
		if mkErr != nil {
			err = fmt.Errorf("build libvgpu, its stub and tests: %w\n%s", mkErr, out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sharedmem:", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// startDriver starts a daemon with two 16 GiB cards joined by NVLink.
func startDriver(t *testing.T) *fakedriver.Driver {
	t.Helper()
	a := fakedriver.Device{UUID: "GPU-a0000000-0000-4000-8000-000000000000", TotalBytes: 16 * gib, SMs: 108,
		Name: "NVIDIA A100-SXM4-16GB"}
	b := fakedriver.Device{UUID: "GPU-b0000000-0000-4000-8000-000000000001", TotalBytes: 16 * gib, SMs: 108,
		Name: "NVIDIA A100-SXM4-16GB"}
	a.NVLinks = []fakedriver.NVLink{{PeerUUID: b.UUID}}
	b.NVLinks = []fakedriver.NVLink{{PeerUUID: a.UUID}}
	dr, err := fakedriver.Start(filepath.Join(t.TempDir(), "driver.sock"),
		fakedriver.Config{Devices: []fakedriver.Device{a, b}, WaveNS: 250000})
	if err != nil {
		t.Fatalf("start driver: %v", err)
	}
	t.Cleanup(func() {
		if err := dr.Close(); err != nil {
			t.Errorf("close driver: %v", err)
		}
	})
	return dr
}

// runCase runs libvgpu's test case with libvgpu preloaded and the stub
// talking to dr, as one container (one region) with a 1 GiB limit per card.
// A case that has not ended within a minute fails (the watchdog), never
// the suite.
func runCase(t *testing.T, dr *fakedriver.Driver, name string, env ...string) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(lib, "build", "vgpu_test"), name)
	cmd.Dir = dir
	cmd.Env = append([]string{
		"PATH=" + os.Getenv("PATH"),
		"LD_PRELOAD=" + filepath.Join(lib, "libvgpu.so"),
		"LD_LIBRARY_PATH=" + filepath.Join(lib, "build", "stub"),
		"VGPU_STUB_DRIVER_SOCKET=" + dr.Path(),
		"VGPU_TEST_DIR=" + dir,
		"CUDA_DEVICE_MEMORY_SHARED_CACHE=" + filepath.Join(dir, "vgpu.cache"),
		fmt.Sprintf("CUDA_DEVICE_MEMORY_LIMIT=%d", limit),
		"VGPU_STUB_CTX_MEM=0",
		"VGPU_STUB_OBSERVER=" + filepath.Join(dir, "observer"),
		fmt.Sprintf("VGPU_STUB_OBSERVER_LIMIT=%d", limit),
	}, env...)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%s did not end within a minute:\n%s", name, out)
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, out)
	}
}

// TestSharedMemoryUnderTheDaemon: an exporter and an importer in one
// container, through CUDA IPC and through VMM descriptors passed with
// SCM_RIGHTS: the cases pass (importer charged nothing, the exporter's
// freed memory still counted while mapped) and the card never held more
// than the container's limit, by the daemon's own peak.
func TestSharedMemoryUnderTheDaemon(t *testing.T) {
	for _, name := range []string{"ipc_exporter", "vmm_fd_export"} {
		t.Run(name, func(t *testing.T) {
			dr := startDriver(t)
			runCase(t, dr, name)
			if peak := dr.Peak(0); peak > limit {
				t.Errorf("card 0 peaked at %d bytes, over the %d-byte limit", peak, limit)
			}
			if peak := dr.Peak(0); peak < limit/2 {
				t.Errorf("card 0 peaked at %d bytes: the case never shared its 512 MiB", peak)
			}
			if s := dr.Stats(); s.Devices[0].UsedBytes != 0 {
				t.Errorf("card 0 still holds %d bytes after every process ended", s.Devices[0].UsedBytes)
			}
		})
	}
}

// TestPeersUnderTheDaemon: with the daemon's NVLinked cards, peer and
// NVLink queries come through libvgpu unchanged.
func TestPeersUnderTheDaemon(t *testing.T) {
	dr := startDriver(t)
	runCase(t, dr, "peer_passthrough", "PEER_EXPECT=nvlink", "CUDA_DEVICE_MEMORY_LIMIT=512m")
}
