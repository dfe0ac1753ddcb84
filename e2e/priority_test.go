//go:build e2e

package e2e

import (
	"syscall"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/e2e/runc"
)

// TestNodeSidePriority: two containers on one card, one asking
// volcano.sh/vgpu-priority 0 (high) and one 1 (low). The agent's Allocate
// answers carry CUDA_TASK_PRIORITY; under runc, with the real agent relaying
// launch stamps between their regions (monitor.Prioritizer), the fake
// driver, which time-slices the card between processes, gives the high one
// its share as if alone while the low one waits, and the low one the card
// once the high one is killed. Shares are the driver's busy time per
// second of the containers' processes, compared with each other in this run.
func TestNodeSidePriority(t *testing.T) {
	const ns = "node-side-priority"
	ctx := setup(t, ns, 10*time.Minute)
	s := startNodeSide(ctx, t)

	task := func(name string, priority int64) framework.VGPUTask {
		tk := s.pinned(name, 1000, 0)
		tk.Limits = v1.ResourceList{"volcano.sh/vgpu-priority": *resource.NewQuantity(priority, resource.DecimalSI)}
		return tk
	}
	pods := runJob(ctx, t, ns, "prio", task("high", 0), task("low", 1))
	for name, want := range map[string]string{"high": "0", "low": "1"} {
		alloc, err := s.Allocation(ctx, pods[name].UID)
		if err != nil {
			t.Fatal(err)
		}
		if got := alloc.Envs["CUDA_TASK_PRIORITY"]; got != want {
			t.Errorf("%s: Allocate answered CUDA_TASK_PRIORITY=%q, want %q", name, got, want)
		}
	}

	share := func(c *runc.Container) func() float64 {
		busy := func() time.Duration {
			var sum time.Duration
			for _, pid := range s.GroupPids(c.ID) {
				sum += s.Driver.ProcessBusy(s.dev, pid)
			}
			return sum
		}
		b0, t0 := busy(), time.Now()
		return func() float64 { return float64(busy()-b0) / float64(time.Since(t0)) }
	}
	// window measures the shares of cs over 2 s after 1 s of settling (a
	// measurement window, not a wait for state).
	window := func(cs ...*runc.Container) []float64 {
		time.Sleep(time.Second)
		ends := make([]func() float64, len(cs))
		for i, c := range cs {
			ends[i] = share(c)
		}
		time.Sleep(2 * time.Second)
		out := make([]float64, len(cs))
		for i := range ends {
			out[i] = ends[i]()
		}
		return out
	}

	high := s.start(ctx, t, pods["high"], "spin", "60")
	output(ctx, t, high, "spinning")
	highAlone := window(high)[0]
	low := s.start(ctx, t, pods["low"], "spin", "60")
	output(ctx, t, low, "spinning")
	with := window(high, low)
	if err := high.Kill(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	select {
	case <-high.Done():
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	lowAfter := window(low)[0]

	t.Logf("card share: high alone %.3f; high %.3f with low %.3f; low after high was killed %.3f",
		highAlone, with[0], with[1], lowAfter)
	if with[0] < 0.9*highAlone || with[0] > 1.1*highAlone {
		t.Errorf("high priority beside low: %.3f of the card, alone %.3f: want within 10 %%", with[0], highAlone)
	}
	if with[1] > 0.25*lowAfter {
		t.Errorf("low priority beside high: %.3f of the card, after the high one died %.3f: want it held", with[1], lowAfter)
	}
	if lowAfter < 0.9*highAlone {
		t.Errorf("low priority after the high one died: %.3f of the card, a lone spinner gets %.3f", lowAfter, highAlone)
	}
}
