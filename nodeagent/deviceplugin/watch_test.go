package deviceplugin

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/fsnotify/fsnotify"
	testingclock "k8s.io/utils/clock/testing"
)

// Without inotify the socket directory is polled: the kubelet socket
// appearing, then being replaced, are Create events; the plugin socket
// disappearing is a Remove event; nothing else is reported.
func TestPollReportsSocketChanges(t *testing.T) {
	dir := t.TempDir()
	clk := testingclock.NewFakeClock(time.Now())
	p := &Plugin{opts: Options{SocketDir: dir, SocketName: "p.sock", KubeletSocket: "kubelet.sock", Clock: clk}}
	touch := func(name string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	touch("p.sock")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	events := make(chan fsnotify.Event, 4)
	done := make(chan struct{})
	go func() { defer close(done); p.poll(ctx, pollInterval, events, nil) }()
	step := func() *fsnotify.Event {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for !clk.HasWaiters() {
			if time.Now().After(deadline) {
				t.Fatal("the poller never waited on the clock")
			}
			time.Sleep(time.Millisecond)
		}
		clk.Step(pollInterval)
		select {
		case ev := <-events:
			return &ev
		case <-time.After(100 * time.Millisecond):
			return nil
		}
	}
	if ev := step(); ev != nil {
		t.Fatalf("event %v with nothing changed", ev)
	}
	touch("kubelet.sock")
	if ev := step(); ev == nil || ev.Name != p.kubeletPath() || !ev.Has(fsnotify.Create) {
		t.Fatalf("after the kubelet socket appeared: %v, want Create of %s", ev, p.kubeletPath())
	}
	// Replaced (new inode): the kubelet restarted.
	if err := os.Remove(p.kubeletPath()); err != nil {
		t.Fatal(err)
	}
	touch("other")
	touch("kubelet.sock")
	if ev := step(); ev == nil || ev.Name != p.kubeletPath() || !ev.Has(fsnotify.Create) {
		t.Fatalf("after the kubelet socket was replaced: %v, want Create", ev)
	}
	if err := os.Remove(p.SocketPath()); err != nil {
		t.Fatal(err)
	}
	if ev := step(); ev == nil || ev.Name != p.SocketPath() || !ev.Has(fsnotify.Remove) {
		t.Fatalf("after the plugin socket was removed: %v, want Remove of %s", ev, p.SocketPath())
	}
	cancel()
	<-done
}
