//go:build e2e

package fakedriver_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/e2e/fakedriver"
	"github.com/vgpushare/vshare/internal/testroot"
)

// nodesConfig is three cards with minor numbers 4, 2 and 1.
func nodesConfig() fakedriver.Config {
	minor := func(m int) *int { return &m }
	return fakedriver.Config{WaveNS: waveNS, Devices: []fakedriver.Device{
		{UUID: "GPU-a", TotalBytes: gib, SMs: 1, Name: "A", Minor: minor(4)},
		{UUID: "GPU-b", TotalBytes: gib, SMs: 1, Name: "B", Minor: minor(2)},
		{UUID: "GPU-c", TotalBytes: gib, SMs: 1, Name: "C", Minor: minor(1)},
	}}
}

// StartDeviceNodes makes the control socket and one node per card, and
// Close removes them.
func TestDeviceNodeFiles(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "dev")
	dr, err := fakedriver.StartDeviceNodes(dir, nodesConfig())
	if err != nil {
		t.Fatal(err)
	}
	if dr.Path() != filepath.Join(dir, fakedriver.ControlNode) {
		t.Errorf("Path() = %s, want the control node", dr.Path())
	}
	want := map[string]fs.FileMode{"nvidiactl": fs.ModeSocket | 0o666, "nvidia-uvm": 0o444,
		"nvidia4": 0o444, "nvidia2": 0o444, "nvidia1": 0o444}
	got := map[string]fs.FileMode{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = fi.Mode()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("device directory (-want +got):\n%s", diff)
	}
	if err := dr.Close(); err != nil {
		t.Fatal(err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("after Close the directory holds %v", ents)
	}
}

// A process in a mount namespace of its own reaches exactly the cards
// whose driver node is its /dev/nvidia<minor>: a node it made itself, a
// symbolic link to the driver's node by its host path and another card's
// node under the card's name are refused, for every request on the card;
// DEV is answered for every card. The driver's own mount namespace (the
// test process) reaches every card.
func TestDeviceNodesGateCards(t *testing.T) {
	testroot.Require(t, "this test makes a mount namespace, bind mounts and a chroot")
	devDir := filepath.Join(t.TempDir(), "dev")
	dr, err := fakedriver.StartDeviceNodes(devDir, nodesConfig())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { dr.Close() })
	host := dial(t, dr.Path())
	for _, req := range []string{"OPEN 0", "OPEN 1", "OPEN 2", "MEM 2"} {
		if resp := host.do(t, req); !strings.HasPrefix(resp, "OK") {
			t.Errorf("host process: %s: %q, want OK", req, resp)
		}
	}

	tests := []struct {
		name     string
		dev      string
		requests string
		want     string
	}{
		{
			name: "its own card",
			dev:  "bind=" + filepath.Join(devDir, "nvidia4") + "=nvidia4",
			requests: "OPEN 0;ALLOC 0 4096;MEM 0;INFO 0;TOPO 0 0;EVREG 0 8;" +
				"OPEN 1;ALLOC 1 4096;DEV 1;TOPO 0 1;EVREG 1 8",
			want: "OK\nOK\nOK 1073741824 4096\nOK 8 0 0 0 0 0 - - 8\nOK 0\nOK\n" +
				"ERR no access to the card's device node\nERR no access to the card's device node\n" +
				"OK GPU-b 1073741824 1 2 00000000:02:00.0 B\nERR no access to the card's device node\n" +
				"ERR no access to the card's device node\n",
		},
		{
			name:     "a node it made",
			dev:      "file=nvidia2",
			requests: "OPEN 1;PROCS 1",
			want:     "ERR no access to the card's device node\nERR no access to the card's device node\n",
		},
		{
			name:     "a link to the driver's node by its host path",
			dev:      "link=" + filepath.Join(devDir, "nvidia1") + "=nvidia1",
			requests: "OPEN 2",
			want:     "ERR no access to the card's device node\n",
		},
		{
			name:     "another card's node under the card's name",
			dev:      "bind=" + filepath.Join(devDir, "nvidia2") + "=nvidia4",
			requests: "OPEN 0;OPEN 1",
			want:     "ERR no access to the card's device node\nERR no access to the card's device node\n",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cmd := helperCmd(t, "nodes", dr.Path(), envRoot+"="+t.TempDir(), envDev+"="+tc.dev,
				envRequests+"="+tc.requests)
			cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("helper: %v\n%s", err, out)
			}
			if diff := cmp.Diff(tc.want, string(out)); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
		})
	}
	// The driver's truth: the container's allocation on its own card,
	// none on the card it was refused.
	st := dr.Stats()
	if len(st.Devices[0].Processes) != 1 || st.Devices[0].Processes[0].PeakBytes != 4096 {
		t.Errorf("card 0 processes %+v, want one that held 4096 bytes", st.Devices[0].Processes)
	}
	if len(st.Devices[1].Processes) != 0 || st.Devices[1].PeakUsedBytes != 0 {
		t.Errorf("card 1 processes %+v, peak %d: want none", st.Devices[1].Processes, st.Devices[1].PeakUsedBytes)
	}
}
