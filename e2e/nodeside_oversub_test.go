//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/framework"
)

// TestNodeSideOvercommit: memory over-commit from the agent's configuration
// to the driver, under runc. gpu-node-0's agent runs with
// deviceMemoryScaling 2, so a card is shared out as twice its memory and
// the agent's Allocate sets CUDA_OVERSUBSCRIBE=true. A neighbour fills the
// card within its share; a container whose share the full card cannot hold
// allocates past the card: libvgpu serves linear memory (cuMemAlloc,
// cuMemAllocPitch) from host memory mapped into the device, and managed,
// stream-ordered, VMM and array allocations keep the card's
// CUDA_ERROR_OUT_OF_MEMORY. Judged by the fake driver (never libvgpu's numbers): the card
// never holds more than it has, the container's card plus host memory never
// passes its share, the allocation past the share is refused with
// CUDA_ERROR_OUT_OF_MEMORY, and the frees give everything back. The
// context's deadline is the watchdog: every wait fails the test when it
// passes, rather than the suite's timeout ending the run.
func TestNodeSideOvercommit(t *testing.T) {
	const ns = "node-side-overcommit"
	ctx := setup(t, ns, 5*time.Minute)
	// The driver takes the cards' memory from the agent's registration: the
	// physical one, registered before the agent is scaled up.
	s := startNodeSide(ctx, t)
	capacity := s.Driver.Stats().Devices[s.dev].TotalBytes
	capMiB := int64(capacity >> 20)
	s.scaleMemory(ctx, t, 2)

	// The neighbour's share fills the card but for 1 GiB; the container's,
	// three quarters of the card, cannot fit beside it: 1.75 cards shared
	// out of the 2 the scaling promises.
	nbMiB, ocMiB := capMiB-1024, capMiB*3/4
	pods := runJob(ctx, t, ns, "overcommit", s.pinned("neighbour", nbMiB, 0), s.pinned("oc", ocMiB, 0))
	for task, pod := range pods {
		alloc, err := s.Allocation(ctx, pod.UID)
		if err != nil {
			t.Fatal(err)
		}
		if got := alloc.Envs["CUDA_OVERSUBSCRIBE"]; got != "true" {
			t.Errorf("%s: the agent's answer has CUDA_OVERSUBSCRIBE=%q with deviceMemoryScaling 2, want true", task, got)
		}
	}
	nb := s.start(ctx, t, pods["neighbour"], "fill", "1000")
	if got := output(ctx, t, nb, "refused"); got != "2" {
		t.Fatalf("the neighbour's allocation past its share returned %s, want CUDA_ERROR_OUT_OF_MEMORY (2)", got)
	}
	dev := s.Driver.Stats().Devices[s.dev]
	room := dev.TotalBytes - dev.UsedBytes
	if dev.HostBytes != 0 || room >= uint64(ocMiB)<<20/2 {
		t.Fatalf("after the neighbour: card %d of %d MiB used, %d MiB host-mapped; want the card nearly full and nothing host-mapped",
			dev.UsedBytes>>20, capMiB, dev.HostBytes>>20)
	}

	oc := s.start(ctx, t, pods["oc"], "overcommit", "1000")
	// 2000 MiB of each family, past the card's room: the families libvgpu
	// keeps on the card's refusal say so (libvgpu/src/host.c), pitched
	// linear memory is served from host memory at a 1024-byte pitch.
	for _, family := range []string{"managed", "async", "vmm", "array"} {
		if got := output(ctx, t, oc, family); got != "2" {
			t.Errorf("%s past the full card returned %s, want CUDA_ERROR_OUT_OF_MEMORY (2)", family, got)
		}
	}
	if got := output(ctx, t, oc, "pitch"); got != "0" {
		t.Errorf("cuMemAllocPitch past the full card returned %s, want CUDA_SUCCESS from host memory", got)
	}
	pitchMiB := atoi(t, output(ctx, t, oc, "pitch_bytes")) >> 20
	if pitchMiB != 2000 {
		t.Errorf("the pitched allocation took %d MiB, want 2000 (a 1024-byte pitch)", pitchMiB)
	}
	chunks, refused := atoi(t, output(ctx, t, oc, "allocated_mib")), output(ctx, t, oc, "refused")
	if refused != "2" {
		t.Errorf("the allocation past the share returned %s, want CUDA_ERROR_OUT_OF_MEMORY (2)", refused)
	}
	got := chunks + pitchMiB
	if got < ocMiB-64-1000 {
		t.Errorf("the container got %d MiB of its %d MiB share beside a full card, want all but its context and one chunk", got, ocMiB)
	}
	if free := output(ctx, t, oc, "free_failures"); free != "0" {
		t.Errorf("%s of the container's frees failed, want none", free)
	}

	st := s.Driver.Stats().Devices[s.dev]
	g := st.Groups[oc.ID]
	t.Logf("card %d MiB: neighbour %d MiB; container (share %d MiB, %d MiB allocated): %v",
		capMiB, st.Groups[nb.ID].PeakBytes>>20, ocMiB, got, g)
	if st.PeakUsedBytes > st.TotalBytes {
		t.Errorf("the card's peak %d > its capacity %d", st.PeakUsedBytes, st.TotalBytes)
	}
	if g.PeakTotalBytes > uint64(ocMiB)<<20 {
		t.Errorf("the container held %d MiB on the card and in host memory together, over its %d MiB share",
			g.PeakTotalBytes>>20, ocMiB)
	}
	// What it allocated is all in the driver's books, and most of it is
	// host memory: the card had only `room` for it.
	if g.PeakTotalBytes < uint64(got)<<20 || g.PeakHostBytes < uint64(got)<<20-room {
		t.Errorf("the container allocated %d MiB with %d MiB of room on the card, but the driver saw %d MiB in all, %d MiB of it host memory",
			got, room>>20, g.PeakTotalBytes>>20, g.PeakHostBytes>>20)
	}
	if g.PeakBytes > uint64(ocMiB)<<20 || st.Groups[nb.ID].PeakBytes > uint64(nbMiB)<<20 {
		t.Errorf("card memory over a share: container %d of %d MiB, neighbour %d of %d MiB",
			g.PeakBytes>>20, ocMiB, st.Groups[nb.ID].PeakBytes>>20, nbMiB)
	}
	// The frees gave it back: no host memory left, only its context on the card.
	if g.HostBytes != 0 || g.Bytes >= 1000<<20 || st.HostBytes != 0 {
		t.Errorf("after the frees the container holds %d MiB on the card and %d MiB of host memory (%d MiB on the card in all), want its context only",
			g.Bytes>>20, g.HostBytes>>20, st.HostBytes>>20)
	}
}

// scaleMemory restarts the node's agent with deviceMemoryScaling scale (its
// --config-file, as a device-config.yaml), and the default agent again when
// the test ends.
func (s *nodeSide) scaleMemory(ctx context.Context, t *testing.T, scale float64) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "device-config.yaml")
	doc := "nvidia:\n  deviceMemoryScaling: " + strconv.FormatFloat(scale, 'g', -1, 64) + "\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cluster.StartAgent(ctx, s.Node, framework.AgentSpec{Args: []string{"--config-file=" + path}}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cluster.StartAgent(ctx, s.Node, framework.AgentSpec{}); err != nil {
			t.Errorf("restart the agent unscaled: %v", err)
		}
	})
}
