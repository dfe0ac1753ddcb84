//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/framework"
)

// schedConf returns a volcano-scheduler.conf like the default one with the
// given deviceshare arguments ("key: value" each).
func schedConf(args ...string) string {
	var b strings.Builder
	b.WriteString(`actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: deviceshare
    arguments:
`)
	for _, a := range args {
		fmt.Fprintf(&b, "      %s\n", a)
	}
	return b.String()
}

// useScheduler replaces the running scheduler with spec's for the rest of
// the test and starts the default one again when the test ends (after the
// test's own cleanups, which run first).
func useScheduler(ctx context.Context, t *testing.T, spec framework.SchedulerSpec) {
	t.Helper()
	cluster.StopScheduler()
	t.Cleanup(func() {
		cluster.StopScheduler()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := cluster.StartScheduler(ctx); err != nil {
			t.Errorf("start the default scheduler again: %v", err)
		}
	})
	if err := cluster.StartSchedulerWith(ctx, spec); err != nil {
		t.Fatal(err)
	}
}

// useAgents restarts every GPU node's agent as spec says for the rest of
// the test, and with the default spec again when the test ends.
func useAgents(ctx context.Context, t *testing.T, spec framework.AgentSpec) {
	t.Helper()
	restart := func(ctx context.Context, spec framework.AgentSpec) error {
		for _, n := range cluster.Nodes() {
			if !n.VGPU() {
				continue
			}
			if err := cluster.StartAgent(ctx, n, spec); err != nil {
				return err
			}
		}
		return nil
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		if err := restart(ctx, framework.AgentSpec{}); err != nil {
			t.Errorf("restart the agents with the default spec: %v", err)
		}
	})
	if err := restart(ctx, spec); err != nil {
		t.Fatal(err)
	}
}
