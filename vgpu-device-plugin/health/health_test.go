package health_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

func TestParsePolicy(t *testing.T) {
	tests := []struct {
		name, disable, enable string
		want                  map[uint64]bool // xid -> critical
		wantDisabled          bool
		wantErr               string
	}{
		{name: "defaults", want: map[uint64]bool{13: false, 43: false, 109: false, 79: true, 48: true}},
		{name: "disable all", disable: "ALL", wantDisabled: true},
		{name: "disable xids, enable 79", disable: "xids", enable: "79", want: map[uint64]bool{79: true, 48: false}},
		{name: "ignore 79 and 48", disable: "79, 48", want: map[uint64]bool{79: false, 48: false, 94: true}},
		{name: "enable an application xid", enable: "13", want: map[uint64]bool{13: true, 31: false}},
		{name: "enable all", enable: "all", want: map[uint64]bool{13: true, 109: true}},
		{name: "bad disable token", disable: "xid", wantErr: `DP_DISABLE_HEALTHCHECKS="xid": token "xid"`},
		{name: "bad enable token", enable: "-3", wantErr: `DP_ENABLE_HEALTHCHECKS="-3"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p, err := health.ParsePolicy(tc.disable, tc.enable)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Disabled != tc.wantDisabled {
				t.Errorf("Disabled = %v, want %v", p.Disabled, tc.wantDisabled)
			}
			got := map[uint64]bool{}
			for x := range tc.want {
				got[x] = p.EnabledXids[x] || (!p.XidsDisabled && !p.IgnoredXids[x])
			}
			if diff := cmp.Diff(tc.want, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("critical Xids (-want +got):\n%s", diff)
			}
		})
	}
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func TestMonitorTransitions(t *testing.T) {
	srv, err := nvmlmock.New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	uuids := srv.UUIDs()
	tracker := health.NewTracker()
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	m, err := health.NewMonitor(health.MonitorOptions{
		Lib: srv, UUIDs: uuids, Tracker: tracker, Policy: health.DefaultPolicy(),
		Clock: clk, RecoveryAfter: time.Minute, WaitTimeout: 5 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	inject := func(uuid string, typ, data uint64) {
		t.Helper()
		waitFor(t, "event registration", func() bool {
			n, err := srv.InjectEvent(uuid, typ, data)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
	}

	changed := tracker.Changed()
	inject(uuids[1], nvml.EventTypeXidCriticalError, 13) // application Xid: ignored
	inject(uuids[2], nvml.EventTypeXidCriticalError, 79) // fallen off the bus
	inject(uuids[3], nvml.EventTypeDoubleBitEccError, 0)
	waitFor(t, "two unhealthy cards", func() bool { return len(tracker.Unhealthy()) == 2 })
	want := map[string]string{uuids[2]: "Xid 79", uuids[3]: "double-bit ECC error"}
	if diff := cmp.Diff(want, tracker.Unhealthy()); diff != "" {
		t.Errorf("unhealthy cards (-want +got):\n%s", diff)
	}
	select {
	case <-changed:
	default:
		t.Error("Changed() was not signalled")
	}

	clk.Step(30 * time.Second)
	inject(uuids[3], nvml.EventTypeXidCriticalError, 48) // a new error restarts card 3's quiet period
	waitFor(t, "the second error on card 3", func() bool { return tracker.Unhealthy()[uuids[3]] == "Xid 48" })
	clk.Step(31 * time.Second)
	waitFor(t, "card 2 to recover", func() bool { return tracker.Healthy(uuids[2]) })
	if tracker.Healthy(uuids[3]) {
		t.Errorf("card 3 recovered 31s after its last error, want it to wait a minute")
	}
	clk.Step(30 * time.Second)
	waitFor(t, "card 3 to recover", func() bool { return tracker.Healthy(uuids[3]) })
}
