//go:build e2e

package sharedmem

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/fakedriver"
	"github.com/vgpushare/vshare/e2e/runc"
	"github.com/vgpushare/vshare/internal/testroot"
)

// Paths inside the containers.
const (
	ctrDriverDir = "/run/fakegpu"
	ctrRegionDir = "/tmp/vgpu"
	ctrShareDir  = "/shared"
	tpLimitMiB   = 1024
)

// tpContainer is the spec of one container of the tensor-parallel-shaped
// workload: libvgpu preloaded with a 1 GiB limit per card and a region of
// its own, the stub in remote mode on the daemon's socket, the cards
// NVIDIA_VISIBLE_DEVICES names, the directory the ranks meet in, and
// libvgpu's test binary running args.
func tpContainer(t *testing.T, dr *fakedriver.Driver, id, cards, share string, env []string, args ...string) runc.Spec {
	t.Helper()
	region := t.TempDir()
	if err := os.Chmod(region, 0o777); err != nil {
		t.Fatal(err)
	}
	stub := filepath.Join(lib, "build", "stub")
	bin := filepath.Join(lib, "build", "vgpu_test")
	return runc.Spec{
		ID:   id,
		Args: append([]string{bin}, args...),
		Env: append([]string{
			"PATH=/usr/bin:/bin",
			"LD_PRELOAD=" + filepath.Join(lib, "libvgpu.so"),
			"LD_LIBRARY_PATH=" + stub,
			"VGPU_STUB_DRIVER_SOCKET=" + ctrDriverDir + "/" + filepath.Base(dr.Path()),
			"NVIDIA_VISIBLE_DEVICES=" + cards,
			fmt.Sprintf("CUDA_DEVICE_MEMORY_LIMIT=%dm", tpLimitMiB),
			"CUDA_DEVICE_MEMORY_SHARED_CACHE=" + ctrRegionDir + "/vgpu.cache",
			"VGPU_STUB_CTX_MEM=0",
			"VGPU_TEST_DIR=" + ctrShareDir,
			fmt.Sprintf("TP_LIMIT_MIB=%d", tpLimitMiB),
			"TP_SOCK=" + ctrShareDir + "/tp.sock",
			// Ranks that do not wait for each other: each frees its shared
			// buffers while the other still maps them (t_share.c, tp_rank).
			"TP_EAGER=1",
		}, env...),
		Files: []string{bin, filepath.Join(lib, "libvgpu.so"), filepath.Join(stub, "libcuda.so.1"),
			filepath.Join(stub, "libnvidia-ml.so.1")},
		Mounts: []runc.Mount{
			{Host: filepath.Dir(dr.Path()), Container: ctrDriverDir},
			{Host: region, Container: ctrRegionDir},
			{Host: share, Container: ctrShareDir},
		},
	}
}

// runAll starts the containers and waits for all of them; a container
// still running after the deadline fails the test (the watchdog), and every
// one must exit 0 having printed "tp_ok".
func runAll(t *testing.T, specs ...runc.Spec) {
	t.Helper()
	rt, err := runc.New(t.TempDir())
	if err != nil {
		testroot.Unavailable(t, err.Error())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var cs []*runc.Container
	for _, s := range specs {
		c, err := rt.Start(ctx, s)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Delete()
		cs = append(cs, c)
	}
	for _, c := range cs {
		code, err := c.Wait(ctx)
		if err != nil {
			t.Fatalf("container %s did not end in time (watchdog): %v\nstdout:\n%s\nstderr:\n%s", c.ID, err, c.Stdout(), c.Stderr())
		}
		if code != 0 || !strings.Contains(c.Stdout(), "tp_ok") {
			t.Errorf("container %s exited %d\nstdout:\n%s\nstderr:\n%s", c.ID, code, c.Stdout(), c.Stderr())
		}
	}
}

// checkCards: no card ever held more than a container's limit (one
// container per card, or one per card of one container), by the daemon's
// peak, and every card is empty once the workload ended.
func checkCards(t *testing.T, dr *fakedriver.Driver) {
	t.Helper()
	for d, st := range dr.Stats().Devices {
		if st.PeakUsedBytes > tpLimitMiB<<20 {
			t.Errorf("card %d peaked at %d MiB, over the %d MiB limit", d, st.PeakUsedBytes>>20, tpLimitMiB)
		}
		if st.PeakUsedBytes < (tpLimitMiB-64)<<20 {
			t.Errorf("card %d peaked at %d MiB: the rank never filled its share", d, st.PeakUsedBytes>>20)
		}
		if st.UsedBytes != 0 {
			t.Errorf("card %d still holds %d bytes", d, st.UsedBytes)
		}
	}
}

// TestTensorParallelTwoContainers: two containers under runc, each with
// both cards (a share of each), each rank on its own card filling its
// 1 GiB share there and exchanging buffers with the other by CUDA IPC and
// by a VMM descriptor over SCM_RIGHTS (a socket in a directory both
// mount), as NCCL does: nothing that fits fails, no card holds more than
// its container's limit, nothing hangs. Both see both cards because the
// importer maps memory of the exporter's card: a container without that
// card cannot (the real node's device nodes refuse it, as users of real
// nodes report: triton-inference-server #6872, pytorch/tensorpipe #412).
func TestTensorParallelTwoContainers(t *testing.T) {
	dr, share := tpSetup(t)
	runAll(t,
		tpContainer(t, dr, "tp-rank0", "0,1", share, []string{"TP_RANK=0", "TP_DEV=0"}, "tp_rank"),
		tpContainer(t, dr, "tp-rank1", "0,1", share, []string{"TP_RANK=1", "TP_DEV=1"}, "tp_rank"))
	checkCards(t, dr)
}

// TestTensorParallelOneContainer: the same two ranks as two processes of
// one container with both cards, one region.
func TestTensorParallelOneContainer(t *testing.T) {
	dr, share := tpSetup(t)
	runAll(t, tpContainer(t, dr, "tp-pair", "0,1", share, nil, "tp_pair"))
	checkCards(t, dr)
}

// tpSetup starts the driver and makes the directory the containers meet
// in.
func tpSetup(t *testing.T) (*fakedriver.Driver, string) {
	t.Helper()
	testroot.Require(t, "runc starts containers")
	dr := startDriver(t)
	share := t.TempDir()
	if err := os.Chmod(share, 0o777); err != nil {
		t.Fatal(err)
	}
	return dr, share
}

// TestSharedPoolTwoContainers: a stream-ordered pool shared between two
// containers under runc, as a rank hands its pool's buffers to another
// (cuMemPoolExportToShareableHandle, the descriptor over SCM_RIGHTS;
// cuMemPoolExportPointer / cuMemPoolImportPointer): the exporter's
// container, on card 0, is charged its 512 MiB once and fills its share;
// the importer's, with both cards, maps it, is charged nothing and fills
// its own share on card 1. The daemon judges: no card above a container's
// limit, each filled, both empty at the end.
func TestSharedPoolTwoContainers(t *testing.T) {
	dr, share := tpSetup(t)
	runAll(t,
		tpContainer(t, dr, "pool-exporter", "0", share, []string{"POOL_RANK=0"}, "pool_rank"),
		tpContainer(t, dr, "pool-importer", "0,1", share, []string{"POOL_RANK=1", "POOL_DEV=1"}, "pool_rank"))
	checkCards(t, dr)
}
