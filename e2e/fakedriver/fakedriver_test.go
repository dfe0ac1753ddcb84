package fakedriver_test

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/e2e/fakedriver"
	"github.com/vgpushare/vshare/internal/testroot"
)

func TestHandshake(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	tests := []struct{ req, want string }{
		{"HELLO", fmt.Sprintf("OK 2 %d", waveNS)},
		{"DEV 0", fmt.Sprintf("OK GPU-00000000-0000-0000-0000-000000000000 %d 108 0 00000000:01:00.0 NVIDIA A100-SXM4-40GB", dev0Mem)},
		{"DEV 1", fmt.Sprintf("OK GPU-11111111-1111-1111-1111-111111111111 %d 40 1 00000000:02:00.0 Tesla T4", dev1Mem)},
		{"SELF", fmt.Sprintf("OK %d", os.Getpid())},
		{"MEM 1", fmt.Sprintf("OK %d 0", dev1Mem)},
		{"PROCS 0", "OK 0"},
		{"PUTIL 0 0", "OK 0"},
		{"DUTIL 0", "OK 0"},
		{"BUSY 0 1", "OK 0"},
	}
	for _, tc := range tests {
		t.Run(tc.req, func(t *testing.T) { c.expect(t, tc.req, tc.want) })
	}
	fi, err := os.Stat(dr.Path())
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o666 {
		t.Errorf("socket mode %v, want 0666 so any uid can connect", perm)
	}
}

func TestAllocToCapacityThenOOM(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	steps := []struct{ req, want string }{
		{fmt.Sprint("ALLOC 0 ", dev0Mem-gib), "OK"},
		{fmt.Sprint("ALLOC 0 ", gib+1), "OOM"},
		{fmt.Sprint("ALLOC 0 ", gib), "OK"},
		{"MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, dev0Mem)},
		{"ALLOC 0 1", "OOM"},
		{"ALLOC 0 0", "OK"}, // takes nothing, even with the device full
		{"ALLOC 0 18446744073709551615", "OOM"},
		{fmt.Sprint("ALLOC 1 ", dev1Mem), "OK"}, // devices are separate
		{fmt.Sprint("FREE 0 ", gib), "OK"},
		{"MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, dev0Mem-gib)},
		{"ALLOC 0 1", "OK"},
		{fmt.Sprint("FREE 0 ", dev0Mem), "ERR free exceeds held"},
		{fmt.Sprint("FREE 0 ", dev0Mem-gib+1), "OK"},
		{"FREE 0 0", "OK"},
		{"MEM 0", fmt.Sprintf("OK %d 0", dev0Mem)},
	}
	for _, s := range steps {
		c.expect(t, s.req, s.want)
	}
	st := dr.Stats().Devices[0]
	if st.PeakUsedBytes != dev0Mem || dr.Peak(0) != dev0Mem {
		t.Errorf("device 0 peak %d / %d, want %d", st.PeakUsedBytes, dr.Peak(0), dev0Mem)
	}
	if got := dr.ProcessPeak(0, os.Getpid()); got != dev0Mem {
		t.Errorf("process peak %d, want %d", got, dev0Mem)
	}
	dr.ResetPeaks()
	if got := dr.Peak(0); got != 0 {
		t.Errorf("peak after ResetPeaks %d, want 0", got)
	}
}

func TestContextsListedInProcs(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	me := os.Getpid()
	steps := []struct{ req, want string }{
		{"ALLOC 0 4096", "OK"},
		{"PROCS 0", "OK 0"}, // memory without a context is not listed
		{"CTX 0 1", "OK"},
		{"PROCS 0", fmt.Sprintf("OK 1 %d:4096:1", me)},
		{"CTX 0 1", "OK"},
		{"PROCS 0", fmt.Sprintf("OK 1 %d:4096:2", me)},
		{"PROCS 1", "OK 0"},
		{"CTX 0 -1", "OK"},
		{"CTX 0 -1", "OK"},
		{"PROCS 0", "OK 0"},
		{"CTX 0 -1", "ERR context count below zero"},
		{"MEM 0", fmt.Sprintf("OK %d 4096", dev0Mem)}, // contexts do not own memory
	}
	for _, s := range steps {
		c.expect(t, s.req, s.want)
	}
}

func TestProcessDeathFreesMemory(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	const held = 3 * gib
	ch := startChild(t, "hold", dr.Path(), fmt.Sprint(envBytes, "=", held))
	c.expect(t, "MEM 0", fmt.Sprintf("OK %d %d", dev0Mem, held))
	c.expect(t, "PROCS 0", fmt.Sprintf("OK 1 %d:%d:1", ch.pid(), held))
	c.expect(t, "ALLOC 0 "+strconv.FormatUint(gib+1, 10), "OOM")

	// SIGKILL while the child waits in a LAUNCH behind 10 s of work: the
	// driver must see the death now, not when the wait would end.
	ch.kill()
	eventually(t, 5*time.Second, func() (bool, string) {
		resp := c.do(t, "MEM 0")
		return resp == fmt.Sprintf("OK %d 0", dev0Mem), "MEM 0 = " + resp
	})
	c.expect(t, "PROCS 0", "OK 0")
	var got *fakedriver.ProcessStats
	for _, p := range dr.Stats().Devices[0].Processes {
		if p.Pid == ch.pid() {
			got = &p
		}
	}
	want := fakedriver.ProcessStats{Pid: ch.pid(), PeakBytes: held, Service: dr.ProcessBusy(0, ch.pid())}
	if got == nil || *got != want {
		t.Errorf("dead child's stats %+v, want %+v", got, want)
	}
	busy := dr.ProcessBusy(0, ch.pid())
	c.expect(t, "ALLOC 0 "+strconv.FormatUint(dev0Mem, 10), "OK")
	// Its dropped work never runs: a SYNC-ed launch of our own proves the
	// device ticked on after its death.
	c.expect(t, "LAUNCH 0 2000000", "OK")
	c.expect(t, "SYNC 0", "OK")
	if after := dr.ProcessBusy(0, ch.pid()); after != busy {
		t.Errorf("dead child's service grew from %v to %v", busy, after)
	}
}

// TestExitFreesBeforeWaitReturns: the kernel driver frees a process's
// memory while the process exits, before its parent's wait returns (see
// Driver.reap), so memory a SIGKILLed child held is free to the next
// request sent after the wait, not some time later. Several rounds: the
// daemon's goroutine reading the child's hang-up races the request.
func TestExitFreesBeforeWaitReturns(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	whole := strconv.FormatUint(dev0Mem, 10)
	for round := 0; round < 20; round++ {
		ch := startChild(t, "hold", dr.Path(), fmt.Sprint(envBytes, "=", dev0Mem))
		ch.kill()
		if got := c.do(t, "ALLOC 0 "+whole); got != "OK" {
			t.Fatalf("round %d: ALLOC of the whole device right after the holder's wait returned: %q, want OK", round, got)
		}
		c.expect(t, "FREE 0 "+whole, "OK")
	}
}

func TestSingleProcessGetsWholeDevice(t *testing.T) {
	dr := startDriver(t)
	probe := dial(t, dr.Path())
	spin := dial(t, dr.Path()) // the same process: BUSY counts both
	stop := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		for {
			select {
			case <-stop:
				done <- nil
				return
			default:
			}
			if resp, err := spin.try(spinLaunch); err != nil || resp != "OK" {
				done <- fmt.Errorf("LAUNCH: %q, %v", resp, err)
				return
			}
		}
	}()
	busyReq := fmt.Sprintf("BUSY 0 %d", os.Getpid())
	eventually(t, 5*time.Second, func() (bool, string) { return probe.number(t, busyReq) > 0, "no service yet" })
	b0, w0 := probe.number(t, busyReq), time.Now()
	var b1 uint64
	eventually(t, 10*time.Second, func() (bool, string) {
		b1 = probe.number(t, busyReq)
		return b1-b0 >= uint64(300*time.Millisecond), fmt.Sprintf("service grew by %v", time.Duration(b1-b0))
	})
	wall := time.Since(w0)
	grew := time.Duration(b1 - b0)
	if grew < wall*7/10 || grew > wall+50*time.Millisecond {
		t.Errorf("service grew %v in %v of wall time, want about all of it", grew, wall)
	}
	if u := probe.number(t, "DUTIL 0"); u < 80 {
		t.Errorf("DUTIL 0 = %d with one process launching back to back, want about 100", u)
	}
	close(stop)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	probe.expect(t, "SYNC 0", "OK")
}

func TestTwoProcessesShareDevice(t *testing.T) {
	dr := startDriver(t)
	probe := dial(t, dr.Path())
	a := startChild(t, "spin", dr.Path())
	b := startChild(t, "spin", dr.Path())
	since := time.Now().UnixMicro()
	for _, ch := range []*child{a, b} {
		if _, err := fmt.Fprintln(ch.stdin, "go"); err != nil {
			t.Fatal(err)
		}
	}
	busy := func() (uint64, uint64) {
		return probe.number(t, fmt.Sprint("BUSY 0 ", a.pid())), probe.number(t, fmt.Sprint("BUSY 0 ", b.pid()))
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		x, y := busy()
		return x > 0 && y > 0, fmt.Sprintf("service %v and %v", time.Duration(x), time.Duration(y))
	})
	a0, b0 := busy()
	var a1, b1 uint64
	eventually(t, 10*time.Second, func() (bool, string) {
		a1, b1 = busy()
		return a1-a0+b1-b0 >= uint64(500*time.Millisecond), "not enough service yet"
	})
	share := float64(a1-a0) / float64(a1-a0+b1-b0)
	if share < 0.35 || share > 0.65 {
		t.Errorf("first process got %.0f%% of the service (%v vs %v), want about half",
			share*100, time.Duration(a1-a0), time.Duration(b1-b0))
	}
	if u := probe.number(t, "DUTIL 0"); u < 80 {
		t.Errorf("DUTIL 0 = %d with two processes launching, want about 100", u)
	}
	samples := parseSamples(t, probe.do(t, fmt.Sprint("PUTIL 0 ", since)))
	for _, ch := range []*child{a, b} {
		s, ok := samples[ch.pid()]
		if !ok {
			t.Errorf("PUTIL has no sample of pid %d: %v", ch.pid(), samples)
			continue
		}
		if s.pct < 25 || s.pct > 75 {
			t.Errorf("pid %d: sm %d%%, want about 50", ch.pid(), s.pct)
		}
		if s.ts <= since || s.ts > time.Now().UnixMicro() {
			t.Errorf("pid %d: sample time %d not after %d and before now", ch.pid(), s.ts, since)
		}
	}
	if len(samples) != 2 {
		t.Errorf("PUTIL has %d entries, want one per process: %v", len(samples), samples)
	}
}

// sample is a parsed PUTIL entry.
type sample struct {
	ts  int64
	pct int
}

// parseSamples parses a PUTIL response into samples by pid.
func parseSamples(t *testing.T, resp string) map[int]sample {
	t.Helper()
	f := strings.Fields(resp)
	if len(f) < 2 || f[0] != "OK" {
		t.Fatalf("PUTIL: %q", resp)
	}
	if n, err := strconv.Atoi(f[1]); err != nil || n != len(f)-2 {
		t.Fatalf("PUTIL: count %s for %d entries in %q", f[1], len(f)-2, resp)
	}
	out := make(map[int]sample)
	for _, e := range f[2:] {
		var pid, pct int
		var ts int64
		if _, err := fmt.Sscanf(e, "%d:%d:%d", &pid, &ts, &pct); err != nil {
			t.Fatalf("PUTIL entry %q: %v", e, err)
		}
		out[pid] = sample{ts: ts, pct: pct}
	}
	return out
}

// answer runs one request in the background; the channel gets its answer.
func answer(c *client, req string) <-chan string {
	out := make(chan string, 1)
	go func() {
		resp, err := c.try(req)
		if err != nil {
			resp = err.Error()
		}
		out <- resp
	}()
	return out
}

// fakeClockDriver starts a driver whose execution model only moves when
// the test steps the returned clock.
func fakeClockDriver(t *testing.T) (*fakedriver.Driver, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	return startDriver(t, func(c *fakedriver.Config) { c.Clock = clk }), clk
}

// waitService waits until pid's service on device 0 is want.
func waitService(t *testing.T, dr *fakedriver.Driver, pid int, want time.Duration) {
	t.Helper()
	eventually(t, 5*time.Second, func() (bool, string) {
		got := dr.ProcessBusy(0, pid)
		return got == want, fmt.Sprintf("service %v, want %v", got, want)
	})
}

func TestLaunchBackPressure(t *testing.T) {
	dr, clk := fakeClockDriver(t)
	c := dial(t, dr.Path())
	me := os.Getpid()
	// Nothing queued: answered at once, though the clock stands still.
	c.expect(t, "LAUNCH 0 10000000", "OK")
	next := answer(c, "LAUNCH 0 1000000")

	clk.Step(5 * time.Millisecond)
	waitService(t, dr, me, 5*time.Millisecond)
	select {
	case resp := <-next:
		t.Fatalf("LAUNCH answered %q with 5 ms still queued, want it held back", resp)
	default:
	}

	clk.Step(time.Millisecond) // 4 ms queued: within the push buffer
	select {
	case resp := <-next:
		if resp != "OK" {
			t.Fatalf("LAUNCH: %q", resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("LAUNCH still held back with 4 ms queued")
	}
	st := dr.Stats().Devices[0].Processes[0]
	if st.Queued != 5*time.Millisecond || st.Service != 6*time.Millisecond {
		t.Errorf("queued %v, service %v; want 5ms, 6ms", st.Queued, st.Service)
	}
}

func TestSyncWaitsForQueue(t *testing.T) {
	dr, clk := fakeClockDriver(t)
	c := dial(t, dr.Path())
	c.expect(t, "SYNC 0", "OK") // nothing queued
	c.expect(t, "LAUNCH 0 3000000", "OK")
	synced := answer(c, "SYNC 0")
	clk.Step(2 * time.Millisecond)
	waitService(t, dr, os.Getpid(), 2*time.Millisecond)
	select {
	case resp := <-synced:
		t.Fatalf("SYNC answered %q with 1 ms queued", resp)
	default:
	}
	clk.Step(time.Millisecond)
	select {
	case resp := <-synced:
		if resp != "OK" {
			t.Fatalf("SYNC: %q", resp)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("SYNC not answered with the queue empty")
	}
	c.expect(t, fmt.Sprint("BUSY 0 ", os.Getpid()), "OK 3000000")
	c.expect(t, fmt.Sprint("BUSY 1 ", os.Getpid()), "OK 0")
}

func TestGroupPeak(t *testing.T) {
	me := os.Getpid()
	dr := startDriver(t, func(c *fakedriver.Config) {
		c.GroupOf = func(pid int) string { return map[bool]string{true: "tests"}[pid == me] }
	})
	c := dial(t, dr.Path())
	for _, req := range []string{"ALLOC 1 1000", "ALLOC 1 500", "FREE 1 1200", "ALLOC 1 100"} {
		c.expect(t, req, "OK")
	}
	want := fakedriver.GroupStats{Bytes: 400, PeakBytes: 1500, PeakTotalBytes: 1500}
	if got := dr.Stats().Devices[1].Groups["tests"]; got != want {
		t.Errorf("group stats %+v, want %+v", got, want)
	}
	dr.SetGroup(me, "other")
	if got := dr.GroupPeak(1, "other"); got != 400 {
		t.Errorf("peak of the group the memory moved to: %d, want 400", got)
	}
}

func TestMalformedRequests(t *testing.T) {
	dr := startDriver(t)
	c := dial(t, dr.Path())
	tests := []struct{ name, req string }{
		{"empty", ""},
		{"lower case", "hello"},
		{"unknown", "RESET 0"},
		{"extra field", "HELLO 1"},
		{"missing field", "ALLOC 0"},
		{"too many fields", "ALLOC 0 1 2"},
		{"double space", "DEV  0"},
		{"trailing space", "DEV 0 "},
		{"carriage return", "DEV 0\r"},
		{"device out of range", "DEV 2"},
		{"negative device", "DEV -1"},
		{"device not a number", "MEM zero"},
		{"signed number", "ALLOC 0 +5"},
		{"negative size", "ALLOC 0 -5"},
		{"size overflows", "ALLOC 0 18446744073709551616"},
		{"free more than held", "FREE 0 1"},
		{"context delta 2", "CTX 0 2"},
		{"context delta 0", "CTX 0 0"},
		{"context below zero", "CTX 1 -1"},
		{"launch not a number", "LAUNCH 0 1ms"},
		{"putil without last seen", "PUTIL 0"},
		{"busy pid 0", "BUSY 0 0"},
		{"busy pid too large", "BUSY 0 4294967296"},
		{"binary", "\x00\xff\x01"},
		{"too long", strings.Repeat("A", 10000)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if resp := c.do(t, tc.req); !strings.HasPrefix(resp, "ERR ") {
				t.Errorf("%q: got %q, want ERR <reason>", tc.req, resp)
			}
			c.expect(t, "HELLO", fmt.Sprintf("OK 2 %d", waveNS))
		})
	}
}

func TestProtocolViolationsDoNotHurtTheDaemon(t *testing.T) {
	dr := startDriver(t)
	raw := func() net.Conn {
		conn, err := net.Dial("unix", dr.Path())
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	// Pipelined requests are answered in order.
	c := dial(t, dr.Path())
	if _, err := c.c.Write([]byte("HELLO\nSELF\nMEM 1\n")); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("OK 2 %d", waveNS), fmt.Sprintf("OK %d", os.Getpid()), fmt.Sprintf("OK %d 0", dev1Mem)} {
		if got, err := c.r.ReadString('\n'); err != nil || got != want+"\n" {
			t.Fatalf("pipelined: got %q, %v; want %q", got, err, want)
		}
	}
	// A connection that dies mid-request, one that never says anything,
	// one that sends garbage without a newline, and one that hangs up
	// while its LAUNCH is held back.
	for _, payload := range []string{"ALLO", "", strings.Repeat("\xff", 70000)} {
		conn := raw()
		if _, err := conn.Write([]byte(payload)); err != nil {
			t.Fatal(err)
		}
		conn.Close()
	}
	blocked := dial(t, dr.Path())
	blocked.expect(t, "ALLOC 0 1024", "OK")
	blocked.expect(t, "LAUNCH 1 60000000000", "OK")
	if _, err := blocked.c.Write([]byte("LAUNCH 1 1\n")); err != nil {
		t.Fatal(err)
	}
	blocked.c.Close()
	c.c.Close()
	// Once the test process has no connection left, it is gone.
	eventually(t, 5*time.Second, func() (bool, string) {
		st := dr.Stats()
		return st.Devices[0].UsedBytes == 0 && st.Devices[1].Processes[0].Queued == 0,
			fmt.Sprintf("%+v", st.Devices)
	})
	c2 := dial(t, dr.Path())
	c2.expect(t, "HELLO", fmt.Sprintf("OK 2 %d", waveNS))
	c2.expect(t, "MEM 0", fmt.Sprintf("OK %d 0", dev0Mem))
}

func TestConcurrentConnections(t *testing.T) {
	dr := startDriver(t)
	const workers, rounds = 8, 100
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		c := dial(t, dr.Path())
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- churn(c, w, rounds)
		}()
	}
	stop := make(chan struct{})
	readers := make(chan struct{})
	go func() { // the harness reads while the clients work
		defer close(readers)
		// Paced, not spinning: a spinning reader would starve the daemon
		// of its only CPU under -cpu 1.
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				_ = dr.Stats()
				_ = dr.Processes(1)
				_ = dr.Peak(1)
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-readers
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	st := dr.Stats()
	if st.Devices[1].UsedBytes != 0 || st.Devices[1].PeakUsedBytes > dev1Mem {
		t.Errorf("device 1 after the workers freed everything: used %d, peak %d", st.Devices[1].UsedBytes, st.Devices[1].PeakUsedBytes)
	}
}

// churn runs a mix of requests on c and frees what it took.
func churn(c *client, w, rounds int) error {
	var held uint64
	size := uint64(w+1) * 64 << 20
	for i := range rounds {
		reqs := []string{
			fmt.Sprint("ALLOC 1 ", size), "CTX 1 1", "MEM 1", "PROCS 1", "PUTIL 1 0",
			"DUTIL 1", "LAUNCH 1 100000", "CTX 1 -1", fmt.Sprint("BUSY 1 ", os.Getpid()),
		}
		if i%10 == 0 {
			reqs = append(reqs, "SYNC 1")
		}
		for _, req := range reqs {
			resp, err := c.try(req)
			if err != nil {
				return err
			}
			switch {
			case strings.HasPrefix(req, "ALLOC") && resp == "OK":
				held += size
			case strings.HasPrefix(req, "ALLOC") && resp == "OOM":
			case !strings.HasPrefix(resp, "OK"):
				return fmt.Errorf("worker %d: %s: %q", w, req, resp)
			}
		}
		if i%3 == 2 {
			if resp, err := c.try(fmt.Sprint("FREE 1 ", held)); err != nil || resp != "OK" {
				return fmt.Errorf("worker %d: FREE %d: %q, %v", w, held, resp, err)
			}
			held = 0
		}
	}
	if resp, err := c.try(fmt.Sprint("FREE 1 ", held)); err != nil || resp != "OK" {
		return fmt.Errorf("worker %d: FREE %d: %q, %v", w, held, resp, err)
	}
	return nil
}

func TestSelfIsHostPidInPidNamespace(t *testing.T) {
	dr := startDriver(t)
	cmd := helperCmd(t, "self", dr.Path())
	cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWNS}
	out, err := cmd.Output()
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EINVAL) {
		testroot.Unavailable(t, fmt.Sprintf("kernel refuses a new pid namespace (needs root or CAP_SYS_ADMIN): %v", err))
	}
	if err != nil {
		t.Fatalf("helper in a new pid namespace: %v", err)
	}
	var inner, host int
	if _, err := fmt.Sscanf(string(out), "%d OK %d", &inner, &host); err != nil {
		t.Fatalf("helper said %q: %v", out, err)
	}
	if inner != 1 {
		t.Errorf("helper's own pid %d, want 1 (a new pid namespace)", inner)
	}
	if host != cmd.Process.Pid {
		t.Errorf("SELF = %d, want the host pid %d", host, cmd.Process.Pid)
	}
}

func TestStartAndClose(t *testing.T) {
	cfg := fakedriver.Config{WaveNS: 1, Devices: []fakedriver.Device{{UUID: "GPU-1", TotalBytes: 1, SMs: 1, Name: "X"}}}
	dir := t.TempDir()
	if _, err := fakedriver.Start(filepath.Join(dir, "bad.sock"), fakedriver.Config{}); err == nil ||
		!strings.Contains(err.Error(), "WaveNS") {
		t.Errorf("Start with an invalid config: %v, want an error naming WaveNS", err)
	}
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := fakedriver.Start(file, cfg); err == nil {
		t.Error("Start on a regular file succeeded, want an error")
	}

	path := filepath.Join(dir, "driver.sock")
	dr, err := fakedriver.Start(path, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := fakedriver.Start(path, cfg); err == nil {
		t.Error("second Start on a live socket succeeded, want an error")
	}
	c := dial(t, path)
	c.expect(t, "LAUNCH 0 60000000000", "OK")
	held := answer(c, "LAUNCH 0 1")
	if err := dr.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if resp := <-held; strings.HasPrefix(resp, "OK") {
		t.Errorf("held LAUNCH after Close: %q, want the connection closed", resp)
	}
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket after Close: %v, want it removed", err)
	}
	if err := dr.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// A socket left by a daemon that died is replaced.
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	dr, err = fakedriver.Start(path, cfg)
	if err != nil {
		t.Fatalf("Start over a stale socket: %v", err)
	}
	if err := dr.Close(); err != nil {
		t.Error(err)
	}
}
