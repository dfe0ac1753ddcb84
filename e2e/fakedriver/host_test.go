package fakedriver_test

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// TestPinnedHostMemoryIsNotCardMemory: memory cuMemHostAlloc pins and maps
// for a card (HOSTALLOC) is host memory. A full card still grants it; the
// card's used memory, its peak, NVML's per-process figure and the group's
// card peak do not move; the group's card-plus-host peak does. HOSTFREE
// gives back no more than was pinned.
func TestPinnedHostMemoryIsNotCardMemory(t *testing.T) {
	me := os.Getpid()
	dr := startDriver(t, func(c *fakedriver.Config) {
		c.GroupOf = func(pid int) string { return map[bool]string{true: "ctr"}[pid == me] }
	})
	c := dial(t, dr.Path())
	steps := []struct{ req, want string }{
		{"CTX 0 1", "OK"},
		{fmt.Sprint("ALLOC 0 ", dev0Mem), "OK"},
		{"ALLOC 0 1", "OOM"},
		{fmt.Sprint("HOSTALLOC 0 ", 3*gib), "OK"}, // the full card does not matter
		{"HOSTALLOC 0 0", "OK"},
		{"ALLOC 0 1", "OOM"}, // and it took nothing from the card
		{"MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, dev0Mem)},
		{"PROCS 0", fmt.Sprintf("OK 1 %d:%d:1", me, dev0Mem)},
		{fmt.Sprint("HOSTFREE 0 ", 3*gib+1), "ERR free exceeds held"},
		{fmt.Sprint("HOSTFREE 1 ", gib), "ERR free exceeds held"}, // pinned for card 0, not 1
		{fmt.Sprint("HOSTFREE 0 ", gib), "OK"},
		{"HOSTALLOC 0", "ERR wrong number of fields"},
		{"HOSTALLOC 9 1", "ERR invalid device"},
		{"HOSTFREE 0 -1", "ERR invalid number"},
	}
	for _, s := range steps {
		c.expect(t, s.req, s.want)
	}
	st := dr.Stats().Devices[0]
	if st.UsedBytes != dev0Mem || st.PeakUsedBytes != dev0Mem || dr.Peak(0) != dev0Mem || st.HostBytes != 2*gib {
		t.Errorf("card 0: used %d, peak %d / %d, host %d; want used and peak %d (the card), host %d",
			st.UsedBytes, st.PeakUsedBytes, dr.Peak(0), st.HostBytes, dev0Mem, 2*gib)
	}
	want := fakedriver.GroupStats{Bytes: dev0Mem, PeakBytes: dev0Mem, HostBytes: 2 * gib, PeakHostBytes: 3 * gib,
		PeakTotalBytes: dev0Mem + 3*gib}
	if got := st.Groups["ctr"]; got != want {
		t.Errorf("group on card 0: %v, want %v", got, want)
	}
	if got := dr.GroupPeak(0, "ctr"); got != dev0Mem {
		t.Errorf("GroupPeak %d, want %d: host memory is not card memory", got, dev0Mem)
	}
	if got, w := dr.GroupPeakWithHost(0, "ctr"), dev0Mem+3*gib; got != w {
		t.Errorf("GroupPeakWithHost %d, want %d", got, w)
	}
	if got := dr.HostPeak(0, "ctr"); got != 3*gib {
		t.Errorf("HostPeak %d, want %d", got, 3*gib)
	}
	var mine fakedriver.ProcessStats
	for _, p := range st.Processes {
		if p.Pid == me {
			mine = p
		}
	}
	if mine.Bytes != dev0Mem || mine.HostBytes != 2*gib || mine.PeakHostBytes != 3*gib {
		t.Errorf("process on card 0: %+v, want %d on the card and %d (peak %d) pinned", mine, dev0Mem, 2*gib, 3*gib)
	}

	// Freeing card memory lowers the total; its peak stays until reset.
	c.expect(t, fmt.Sprint("FREE 0 ", dev0Mem), "OK")
	dr.ResetPeaks()
	if got := dr.GroupPeakWithHost(0, "ctr"); got != 2*gib {
		t.Errorf("GroupPeakWithHost after ResetPeaks %d, want what is held, %d", got, 2*gib)
	}
	// A group change moves the pinned memory with the process.
	dr.SetGroup(me, "other")
	if got := dr.Stats().Devices[0].Groups; got["ctr"].HostBytes != 0 || got["other"].HostBytes != 2*gib ||
		got["other"].PeakTotalBytes != 2*gib {
		t.Errorf("after SetGroup: ctr %v, other %v; want the %d pinned bytes moved", got["ctr"], got["other"], 2*gib)
	}
}

// TestProcessDeathUnpinsHostMemory: as the kernel driver unpins a process's
// memory when it exits, the end of its last connection gives back the host
// memory it pinned, with its card memory.
func TestProcessDeathUnpinsHostMemory(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	ch := startChild(t, "hold", dr.Path(), fmt.Sprint(envBytes, "=", gib), fmt.Sprint(envHostBytes, "=", 2*gib))
	eventually(t, 5*time.Second, func() (bool, string) {
		h := dr.Stats().Devices[0].HostBytes
		return h == 2*gib, fmt.Sprintf("host bytes %d, want %d", h, 2*gib)
	})
	ch.kill()
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d 0", dev0Mem))
	if h := dr.Stats().Devices[0].HostBytes; h != 0 {
		t.Errorf("host memory pinned for card 0 after the process died: %d, want 0", h)
	}
}
