//go:build e2e

package agentnvml

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
)

// eventually polls cond every 10 ms until it holds, failing the test with
// cond's last explanation after the deadline.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: %s", timeout, why)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Xids injected into the fake driver reach the agent's health monitor
// through nvmlEventSetWait_v2: a critical one (79: fallen off the bus; 48:
// double-bit ECC error) makes its card unhealthy, an application Xid (31:
// MMU fault) is ignored, and no other card is touched.
func TestInjectedXidMakesItsCardUnhealthy(t *testing.T) {
	cfg := nodeConfig()
	uuids := make([]string, len(cfg.Devices))
	for i, d := range cfg.Devices {
		uuids[i] = d.UUID
	}
	tracker := health.NewTracker()
	mon, err := health.NewMonitor(health.MonitorOptions{Lib: lib, UUIDs: uuids, Tracker: tracker,
		Policy: health.DefaultPolicy(), RecoveryAfter: -1, WaitTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- mon.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("monitor: %v", err)
		}
	}()
	// The monitor has registered every card once an Xid on each reaches
	// one event set; Xid 31 is one the default policy ignores.
	for d := range uuids {
		eventually(t, 10*time.Second, func() (bool, string) {
			n, err := driver.InjectXid(d, 31)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1, fmt.Sprintf("card %d: Xid delivered to %d event sets, want 1", d, n)
		})
	}
	for _, x := range []struct {
		card int
		xid  uint64
	}{{6, 79}, {1, 48}} {
		if n, err := driver.InjectXid(x.card, x.xid); err != nil || n != 1 {
			t.Fatalf("InjectXid(%d, %d): %d sets, %v", x.card, x.xid, n, err)
		}
	}
	want := map[string]string{uuids[6]: "Xid 79", uuids[1]: "Xid 48"}
	eventually(t, 10*time.Second, func() (bool, string) {
		got := tracker.Unhealthy()
		return cmp.Equal(want, got), fmt.Sprintf("unhealthy cards (-want +got):\n%s", cmp.Diff(want, got))
	})
	for i, u := range uuids {
		if _, bad := want[u]; !bad && !tracker.Healthy(u) {
			t.Errorf("card %d (%s) unhealthy, want healthy", i, u)
		}
	}
}
