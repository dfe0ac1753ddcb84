package nvmlmock

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/google/go-cmp/cmp"
)

func TestParseEvent(t *testing.T) {
	tests := []struct {
		name, line string
		want       event
		wantErr    bool
	}{
		{name: "xid", line: "GPU-1 xid 79", want: event{uuid: "GPU-1", eventType: nvml.EventTypeXidCriticalError, data: 79}},
		{name: "ecc", line: "GPU-1  ecc", want: event{uuid: "GPU-1", eventType: nvml.EventTypeDoubleBitEccError}},
		{name: "xid without a number", line: "GPU-1 xid", wantErr: true},
		{name: "xid not a number", line: "GPU-1 xid 7x", wantErr: true},
		{name: "unknown kind", line: "GPU-1 fire", wantErr: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseEvent(tc.line)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseEvent(%q) error = %v, want error %v", tc.line, err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(event{})); !tc.wantErr && diff != "" {
				t.Errorf("parseEvent(%q) (-want +got):\n%s", tc.line, diff)
			}
		})
	}
}

// FollowEvents delivers appended lines, a line written before any event set
// exists included, skips bad lines and waits for an incomplete last line.
func TestFollowEvents(t *testing.T) {
	srv, err := New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	uuids := srv.UUIDs()
	path := filepath.Join(t.TempDir(), "events")
	appendLine := func(s string) {
		t.Helper()
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	appendLine(uuids[0] + " xid 79\nnonsense\nGPU-unknown ecc\n")

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.FollowEvents(ctx, path, 5*time.Millisecond) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("FollowEvents: %v", err)
		}
	}()

	set, ret := srv.EventSetCreate()
	if ret != nvml.SUCCESS {
		t.Fatal(ret)
	}
	for _, u := range uuids[:2] {
		dev, _ := srv.DeviceGetHandleByUUID(u)
		if ret := dev.RegisterEvents(nvml.EventTypeXidCriticalError|nvml.EventTypeDoubleBitEccError, set); ret != nvml.SUCCESS {
			t.Fatal(ret)
		}
	}
	next := func() (string, uint64, uint64) {
		t.Helper()
		e, ret := set.Wait(5000)
		if ret != nvml.SUCCESS {
			t.Fatalf("Wait: %v", ret)
		}
		u, _ := e.Device.GetUUID()
		return u, e.EventType, e.EventData
	}
	if u, typ, data := next(); u != uuids[0] || typ != nvml.EventTypeXidCriticalError || data != 79 {
		t.Errorf("first event = %s %d %d, want %s Xid 79", u, typ, data, uuids[0])
	}
	appendLine(uuids[1] + " ec") // incomplete: not delivered until the newline
	appendLine("c\n")
	if u, typ, _ := next(); u != uuids[1] || typ != nvml.EventTypeDoubleBitEccError {
		t.Errorf("second event = %s %d, want %s double-bit ECC", u, typ, uuids[1])
	}
}
