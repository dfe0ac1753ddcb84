//go:build e2e

package framework

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestComponent(t *testing.T) {
	for name, want := range map[string]string{
		"agent-node-007":        "agent",
		"agent-node-007-3":      "agent",
		"vnpu-agent-npu-1":      "vnpu-agent",
		"vc-scheduler":          "vc-scheduler",
		"vc-scheduler-2":        "vc-scheduler",
		"vc-scheduler-stock":    "vc-scheduler-stock",
		"kube-apiserver":        "kube-apiserver",
		"vc-controller-manager": "vc-controller-manager",
	} {
		if got := component(name); got != want {
			t.Errorf("component(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestCPUTimeGrows: the reading of our own process follows the CPU a busy
// loop burns, and never runs ahead of the wall clock on every CPU.
func TestCPUTimeGrows(t *testing.T) {
	start := time.Now()
	before, err := cpuTime(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	const want = 200 * time.Millisecond
	var got time.Duration
	for x := 0; got < want; x++ {
		if x%1_000_000 == 0 {
			if time.Since(start) > time.Minute {
				t.Fatalf("CPU time grew by %v in a minute of spinning, want %v", got, want)
			}
			after, err := cpuTime(os.Getpid())
			if err != nil {
				t.Fatal(err)
			}
			got = after - before
		}
	}
	// proc(5) counts in USER_HZ ticks: allow two of rounding.
	if limit := time.Since(start)*time.Duration(runtime.NumCPU()) + 2*clockTick; got > limit {
		t.Errorf("CPU time grew by %v, more than the wall time on every CPU (%v)", got, limit)
	}
	if _, err := cpuTime(1 << 30); err == nil {
		t.Error("cpuTime of a pid that cannot exist: no error")
	}
}
