package fakedriver_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// factsDriver starts a driver with two cards whose NVML facts are set:
// NVLinked A100s behind one PCIe switch, and a third card on another NUMA
// node without NVLink or MIG.
func factsDriver(t *testing.T, mutate ...func(*fakedriver.Config)) *fakedriver.Driver {
	t.Helper()
	minor := func(m int) *int { return &m }
	return startDriver(t, append([]func(*fakedriver.Config){func(c *fakedriver.Config) {
		c.DriverVersion = "535.104.05"
		c.Devices[0].Minor, c.Devices[1].Minor = minor(4), minor(2)
		c.Devices[0].PCIBusID, c.Devices[1].PCIBusID = "0000:07:00.0", "0000:0f:00.0"
		c.Devices[0].MIGCapable, c.Devices[0].NUMANode, c.Devices[0].CPUs = true, 0, []int{0, 1, 2, 3}
		c.Devices[0].PCIeSwitch, c.Devices[1].PCIeSwitch = "sw0", "sw0"
		c.Devices[0].NVLinks = []fakedriver.NVLink{{PeerUUID: c.Devices[1].UUID}, {PeerUUID: c.Devices[1].UUID}}
		c.Devices[1].NVLinks = []fakedriver.NVLink{{PeerUUID: c.Devices[0].UUID}, {PeerUUID: c.Devices[0].UUID}}
		c.Devices = append(c.Devices, fakedriver.Device{UUID: "GPU-22222222-2222-2222-2222-222222222222",
			TotalBytes: gib, SMs: 40, Name: "Tesla T4", ComputeCapability: "7.5", NUMANode: 1, PCIBusID: "0000:86:00.0", Minor: minor(1)})
	}}, mutate...)...)
}

func TestNVMLFactRequests(t *testing.T) {
	dr := factsDriver(t)
	c := dial(t, dr.Path())
	tests := []struct{ req, want string }{
		{"HELLO", fmt.Sprintf("OK 3 %d", waveNS)},
		{"DEV 0", fmt.Sprintf("OK GPU-00000000-0000-0000-0000-000000000000 %d 108 4 00000000:07:00.0 NVIDIA A100-SXM4-40GB", dev0Mem)},
		{"DEV 2", fmt.Sprintf("OK GPU-22222222-2222-2222-2222-222222222222 %d 40 1 00000000:86:00.0 Tesla T4", gib)},
		{"OPEN 1", "OK"},
		{"INFO 0", "OK 8 0 1 0 0 0 0,1,2,3 gpu/00000000:0F:00.0,gpu/00000000:0F:00.0 8"},
		{"INFO 2", "OK 7 5 0 0 0 1 - - 8"},
		{"TOPO 0 1", "OK 10"},
		{"TOPO 1 2", "OK 50"},
		{"TOPO 2 2", "OK 0"},
		{"SYS", "OK 535.104.05"},
	}
	for _, tc := range tests {
		t.Run(tc.req, func(t *testing.T) { c.expect(t, tc.req, tc.want) })
	}
	for _, bad := range []string{"OPEN 3", "OPEN", "INFO 0 0", "TOPO 0", "TOPO 0 3", "SYS 1", "EVREG 0", "EVREG 0 2",
		"EVREG 3 8", "EVWAIT", "EVWAIT -1", "EVWAIT 4294967296"} {
		if resp := c.do(t, bad); !strings.HasPrefix(resp, "ERR ") {
			t.Errorf("%q: got %q, want ERR <reason>", bad, resp)
		}
	}
}

// A driver started without a version reports the default one.
func TestDefaultDriverVersion(t *testing.T) {
	c := dial(t, startDriver(t).Path())
	c.expect(t, "SYS", "OK "+fakedriver.DefaultDriverVersion)
}

// evwait sends EVWAIT on c and steps clk by the timeout until the answer
// comes: the driver's timer exists only once it has read the request.
func evwait(t *testing.T, c *client, clk interface{ Step(time.Duration) }, ms int) string {
	t.Helper()
	got := answer(c, fmt.Sprintf("EVWAIT %d", ms))
	deadline := time.After(10 * time.Second)
	for {
		select {
		case resp := <-got:
			return resp
		case <-deadline:
			t.Fatalf("EVWAIT %d: no answer", ms)
		case <-time.After(5 * time.Millisecond):
			clk.Step(time.Duration(ms) * time.Millisecond)
		}
	}
}

// Xids reach every event set registered for Xid events on their card,
// in order, and only those raised after the registration; an event set
// without events times out.
func TestXidEvents(t *testing.T) {
	dr, clk := fakeClockDriver(t)
	early, err := dr.InjectXid(0, 13)
	if err != nil || early != 0 {
		t.Fatalf("InjectXid before any registration: %d, %v; want 0 sets", early, err)
	}
	watch0, watch1 := dial(t, dr.Path()), dial(t, dr.Path())
	watch0.expect(t, "EVREG 0 8", "OK")
	watch1.expect(t, "EVREG 1 8", "OK")
	watch1.expect(t, "EVREG 1 0", "OK")
	for _, xid := range []uint64{79, 48} {
		if n, err := dr.InjectXid(0, xid); err != nil || n != 1 {
			t.Fatalf("InjectXid(0, %d): %d, %v; want 1 set", xid, n, err)
		}
	}
	if n, err := dr.InjectXid(1, 31); err != nil || n != 1 {
		t.Fatalf("InjectXid(1, 31): %d, %v; want 1 set", n, err)
	}
	if _, err := dr.InjectXid(2, 79); err == nil {
		t.Error("InjectXid on device 2 of 2: no error")
	}
	got := []string{watch0.do(t, "EVWAIT 0"), evwait(t, watch0, clk, 1000), watch1.do(t, "EVWAIT 1000"),
		evwait(t, watch0, clk, 250), evwait(t, watch1, clk, 0)}
	want := []string{"OK 1 0 8 79", "OK 1 0 8 48", "OK 1 1 8 31", "OK 0", "OK 0"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("EVWAIT answers (-want +got):\n%s", diff)
	}
	// An event set without registrations only ever times out.
	idle := dial(t, dr.Path())
	if resp := evwait(t, idle, clk, 100); resp != "OK 0" {
		t.Errorf("EVWAIT without EVREG: %q, want OK 0", resp)
	}
	// A set whose connection ended is gone (nvmlEventSetFree).
	watch0.c.Close()
	eventually(t, 5*time.Second, func() (bool, string) {
		n, _ := dr.InjectXid(0, 79)
		return n == 0, fmt.Sprintf("%d sets still get Xids on device 0", n)
	})
}

// An event that comes while a client waits ends its wait.
func TestXidEndsAWait(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	c.expect(t, "EVREG 1 8", "OK")
	got := answer(c, "EVWAIT 60000")
	eventually(t, 10*time.Second, func() (bool, string) {
		select {
		case resp := <-got:
			if resp != "OK 1 1 8 94" {
				t.Fatalf("EVWAIT: %q, want OK 1 1 8 94", resp)
			}
			return true, ""
		default:
		}
		_, _ = dr.InjectXid(1, 94)
		return false, "no event delivered"
	})
}

// ListCards reads what DEV says of every card.
func TestListCards(t *testing.T) {
	dr := factsDriver(t)
	cards, err := fakedriver.ListCards(dr.Path(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want := []fakedriver.Card{
		{Index: 0, UUID: "GPU-00000000-0000-0000-0000-000000000000", TotalBytes: dev0Mem, SMs: 108, Minor: 4, PCIBusID: "00000000:07:00.0", Name: "NVIDIA A100-SXM4-40GB"},
		{Index: 1, UUID: "GPU-11111111-1111-1111-1111-111111111111", TotalBytes: dev1Mem, SMs: 40, Minor: 2, PCIBusID: "00000000:0F:00.0", Name: "Tesla T4"},
		{Index: 2, UUID: "GPU-22222222-2222-2222-2222-222222222222", TotalBytes: gib, SMs: 40, Minor: 1, PCIBusID: "00000000:86:00.0", Name: "Tesla T4"},
	}
	if diff := cmp.Diff(want, cards); diff != "" {
		t.Errorf("cards (-want +got):\n%s", diff)
	}
	if _, err := fakedriver.ListCards(filepath.Join(t.TempDir(), "none.sock"), time.Second); err == nil {
		t.Error("ListCards on a missing socket: no error")
	}
}
