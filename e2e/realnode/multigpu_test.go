//go:build e2e

package realnode

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// TestMultiGPUOnRealNode: the jobs that fail most under preload-based
// sharing, on the real node. A tensor-parallel pair (vLLM's shape: one pod,
// a worker process per card) shares buffers both ways between the node's
// two cards by CUDA IPC and by VMM descriptors over a Unix socket, each
// rank filling its card's share: the peer's buffers cost it nothing, no
// card holds more than the share, nothing hangs. A container given a whole
// card runs without libvgpu and gets the card.
func TestMultiGPUOnRealNode(t *testing.T) {
	const ns = "multigpu"
	ctx := setup(t, ns, 6*time.Minute)
	t.Run("tensor-parallel pair sharing by IPC and VMM descriptors", func(t *testing.T) { tensorParallel(ctx, t, ns) })
	t.Run("a whole card runs without libvgpu", func(t *testing.T) { wholeCard(ctx, t, ns) })
}

func tensorParallel(ctx context.Context, t *testing.T, ns string) {
	const limit = 2048 // MiB per card
	pods := runJob(ctx, t, ns, "tp", task("tp", 2, limit, 50, "tp"))
	pod := pods["tp"]
	if got := logValue(ctx, t, pod, "tp_done"); got != "1" {
		t.Fatalf("pod %s: tp_done=%s: a rank did not get through (its log has the step)", pod.Name, got)
	}
	id := containerID(ctx, t, pod)
	for rank := range 2 {
		r := fmt.Sprintf("r%d_", rank)
		for key, want := range map[string]string{"spare": "0", "over": "2", "copy_failures": "0", "teardown_failures": "0"} {
			if got := logValue(ctx, t, pod, r+key); got != want {
				t.Errorf("pod %s: %s%s=%s, want %s (spare: the last 256 MiB of the card's share fit beside the peer's buffers; over: one MiB more is CUDA_ERROR_OUT_OF_MEMORY)",
					pod.Name, r, key, got, want)
			}
		}
	}
	for dev, card := range rc.Driver.Stats().Devices {
		g := card.Groups[id]
		if g.PeakBytes > limit<<20 {
			t.Errorf("pod %s held %d MiB on card %d, over its %d MiB share", pod.Name, g.PeakBytes>>20, dev, limit)
		}
		if g.PeakBytes < (limit-64)<<20 {
			t.Errorf("pod %s peaked at %d MiB on card %d: the rank never filled its %d MiB share", pod.Name, g.PeakBytes>>20, dev, limit)
		}
		if g.Bytes != 0 {
			t.Errorf("pod %s still holds %d bytes on card %d after its teardown", pod.Name, g.Bytes, dev)
		}
		t.Logf("card %d: driver peak %d MiB for the pod, share %d MiB", dev, g.PeakBytes>>20, limit)
	}
}

// wholeCard: all of a card's memory and cores. The container's spec has
// no preload and no limits, and it allocates the whole card.
func wholeCard(ctx context.Context, t *testing.T, ns string) {
	card := rc.Driver.Stats().Devices[1]
	total := int64(card.TotalBytes >> 20)
	pods := runJob(ctx, t, ns, "whole", onCard(task("whole", 1, total, 100, "fill", "256"), card.UUID))
	pod := pods["whole"]
	got := atoi(t, logValue(ctx, t, pod, "allocated_mib"))
	id := containerID(ctx, t, pod)
	raw, err := rc.Node.BundleSpec(id)
	if err != nil {
		t.Fatal(err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(raw, &spec); err != nil {
		t.Fatalf("container %s: config.json: %v", id, err)
	}
	for _, e := range spec.Process.Env {
		if strings.HasPrefix(e, "CUDA_DEVICE_") {
			t.Errorf("container %s: %s in the spec's environment: a whole card has no limits", id, e)
		}
	}
	if !slices.Contains(spec.Process.Env, "NVIDIA_VISIBLE_DEVICES="+card.UUID) {
		t.Errorf("container %s: NVIDIA_VISIBLE_DEVICES=%s not in the spec's environment %q", id, card.UUID, spec.Process.Env)
	}
	for _, m := range spec.Mounts {
		if m.Destination == "/etc/ld.so.preload" || strings.HasPrefix(m.Destination, filepath.Dir("/usr/local/vgpu/libvgpu.so")) {
			t.Errorf("container %s: libvgpu mounted at %s: a whole card runs without it", id, m.Destination)
		}
	}
	// The fill stops at the card's own refusal: all of it but what the
	// driver keeps for the context.
	if got < total-512 {
		t.Errorf("pod %s allocated %d MiB of its whole %d MiB card", pod.Name, got, total)
	}
	t.Logf("whole card %s: %d of %d MiB allocated, no libvgpu in the spec", card.UUID, got, total)
}
