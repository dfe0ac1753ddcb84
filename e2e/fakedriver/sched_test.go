package fakedriver

import (
	"math/rand"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// t0 is where the model's time starts in these tests.
var t0 = time.Unix(1_700_000_000, 0)

// testDevices returns n small devices.
func testDevices(n int) []Device {
	var ds []Device
	for i := range n {
		ds = append(ds, Device{UUID: "GPU-" + string(rune('a'+i)), TotalBytes: 1 << 30, SMs: 108, Name: "Fake-GPU"})
	}
	return ds
}

// queue puts work on device d for pid, as an accepted LAUNCH does.
func queue(t *testing.T, s *state, pid, d int, work time.Duration) *process {
	t.Helper()
	p := s.attach(pid, "")
	if err := s.launch(p, d, uint64(work), nil); err != nil {
		t.Fatalf("launch pid %d: %v", pid, err)
	}
	return p
}

func TestProcessorSharing(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name string
		work map[int]time.Duration // queued work by pid
		run  time.Duration
		want map[int]time.Duration // service by pid
	}{
		{name: "one process gets the whole device", work: map[int]time.Duration{10: 50 * ms}, run: 20 * ms,
			want: map[int]time.Duration{10: 20 * ms}},
		{name: "two processes get half each", work: map[int]time.Duration{10: 50 * ms, 20: 50 * ms}, run: 20 * ms,
			want: map[int]time.Duration{10: 10 * ms, 20: 10 * ms}},
		{name: "three processes get a third each", work: map[int]time.Duration{1: 30 * ms, 2: 30 * ms, 3: 30 * ms}, run: 30 * ms,
			want: map[int]time.Duration{1: 10 * ms, 2: 10 * ms, 3: 10 * ms}},
		{name: "a small need leaves its share to the others", work: map[int]time.Duration{1: 200 * time.Microsecond, 2: 10 * ms, 3: 10 * ms}, run: ms,
			want: map[int]time.Duration{1: 200 * time.Microsecond, 2: 400 * time.Microsecond, 3: 400 * time.Microsecond}},
		{name: "the rest after a process finishes", work: map[int]time.Duration{1: 2 * ms, 2: 20 * ms}, run: 10 * ms,
			want: map[int]time.Duration{1: 2 * ms, 2: 8 * ms}},
		{name: "all done early leaves the device idle", work: map[int]time.Duration{1: 3 * ms, 2: 4 * ms}, run: 50 * ms,
			want: map[int]time.Duration{1: 3 * ms, 2: 4 * ms}},
		{name: "a partial tick is not run", work: map[int]time.Duration{1: 10 * ms}, run: 2*ms + 999*time.Microsecond,
			want: map[int]time.Duration{1: 2 * ms}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := newState(testDevices(1), t0)
			for pid, w := range tc.work {
				queue(t, s, pid, 0, w)
			}
			s.advance(t0.Add(tc.run))
			got := make(map[int]time.Duration)
			for pid := range tc.work {
				got[pid] = time.Duration(s.busy(0, pid))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("service (-want +got):\n%s", diff)
			}
			var sum time.Duration
			for _, v := range tc.want {
				sum += v
			}
			if busy := time.Duration(s.devs[0].busyNS); busy != sum {
				t.Errorf("device busy %v, want %v", busy, sum)
			}
		})
	}
}

func TestAdvanceStepByStepEqualsOneJump(t *testing.T) {
	jump := newState(testDevices(1), t0)
	steps := newState(testDevices(1), t0)
	for _, s := range []*state{jump, steps} {
		queue(t, s, 1, 0, 7*time.Millisecond)
		queue(t, s, 2, 0, 300*time.Millisecond)
	}
	jump.advance(t0.Add(250 * time.Millisecond))
	for i := 1; i <= 250; i++ {
		steps.advance(t0.Add(time.Duration(i) * time.Millisecond))
	}
	for pid := 1; pid <= 2; pid++ {
		if a, b := jump.busy(0, pid), steps.busy(0, pid); a != b {
			t.Errorf("pid %d: service %d in one jump, %d step by step", pid, a, b)
		}
	}
	if diff := cmp.Diff(jump.procUtil(0, 0), steps.procUtil(0, 0), cmp.AllowUnexported(utilSample{})); diff != "" {
		t.Errorf("samples (-jump +steps):\n%s", diff)
	}
}

func TestUtilisationSamples(t *testing.T) {
	s := newState(testDevices(2), t0)
	queue(t, s, 10, 0, time.Second)
	queue(t, s, 20, 0, 50*time.Millisecond) // done halfway through period 1
	s.advance(t0.Add(250 * time.Millisecond))
	end1 := t0.Add(100 * time.Millisecond).UnixMicro()
	end2 := t0.Add(200 * time.Millisecond).UnixMicro()
	tests := []struct {
		name     string
		d        int
		lastSeen uint64
		want     []utilSample
	}{
		// Period 1: both run 50 ms; period 2: pid 10 alone.
		{name: "all kept samples, averaged per process", lastSeen: 0, want: []utilSample{
			{pid: 10, tsUS: end2, smPct: 75}, {pid: 20, tsUS: end1, smPct: 50}}},
		{name: "only samples after last seen", lastSeen: uint64(end1), want: []utilSample{
			{pid: 10, tsUS: end2, smPct: 100}}},
		{name: "none after the newest", lastSeen: uint64(end2), want: []utilSample{}},
		{name: "an idle device has none", d: 1, want: []utilSample{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := s.procUtil(tc.d, tc.lastSeen)
			if diff := cmp.Diff(tc.want, got, cmp.AllowUnexported(utilSample{})); diff != "" {
				t.Errorf("PUTIL (-want +got):\n%s", diff)
			}
		})
	}
	if got := s.devUtil(0); got != 100 {
		t.Errorf("DUTIL 0 = %d, want 100 (period 2 fully busy)", got)
	}
	if got := s.devUtil(1); got != 0 {
		t.Errorf("DUTIL 1 = %d, want 0", got)
	}
}

func TestDeviceUtilisationOfPartlyBusyPeriod(t *testing.T) {
	s := newState(testDevices(1), t0)
	if got := s.devUtil(0); got != 0 {
		t.Errorf("DUTIL before the first period ends = %d, want 0", got)
	}
	queue(t, s, 1, 0, 30*time.Millisecond)
	queue(t, s, 2, 0, 10*time.Millisecond)
	s.advance(t0.Add(100 * time.Millisecond))
	if got := s.devUtil(0); got != 40 {
		t.Errorf("DUTIL = %d, want 40", got)
	}
}

func TestOnlyTheLastPeriodsAreKept(t *testing.T) {
	s := newState(testDevices(1), t0)
	queue(t, s, 1, 0, 10*time.Millisecond) // runs in the first period only
	// An hour with nothing queued after that is skipped, not ticked.
	s.advance(t0.Add(time.Hour))
	if n := len(s.devs[0].periods); n != keptPeriods {
		t.Fatalf("%d periods kept, want %d", n, keptPeriods)
	}
	if got := s.procUtil(0, 0); len(got) != 0 {
		t.Errorf("PUTIL after an idle hour = %+v, want none (the busy period has left the window)", got)
	}
	last := s.devs[0].periods[keptPeriods-1].endUS
	if want := t0.Add(time.Hour).UnixMicro(); last != want {
		t.Errorf("newest period ends at %d, want %d", last, want)
	}
}

func TestProcessEndReleasesEverything(t *testing.T) {
	s := newState(testDevices(2), t0)
	a := s.attach(7, "")
	b := s.attach(7, "") // a second connection of the same process
	mustAlloc(t, s, a, 0, 100)
	mustAlloc(t, s, b, 1, 200)
	if err := s.context(a, 0, 1); err != nil {
		t.Fatal(err)
	}
	c := queue(t, s, 7, 1, time.Second) // a third connection
	s.end(&conn{p: a})
	s.end(&conn{p: b})
	if _, used := s.memInfo(1); used != 200 {
		t.Fatalf("after closing 2 of 3 connections: used %d on device 1, want 200", used)
	}
	s.end(&conn{p: c})
	for d := range 2 {
		if _, used := s.memInfo(d); used != 0 {
			t.Errorf("device %d: used %d after the process ended, want 0", d, used)
		}
	}
	if got := s.listed(0); len(got) != 0 {
		t.Errorf("listed after the process ended: %+v", got)
	}
	s.advance(t0.Add(10 * time.Millisecond))
	if got := s.busy(1, 7); got != 0 {
		t.Errorf("dropped work ran for %d ns", got)
	}
}

// mustAlloc allocates and fails the test unless it succeeds.
func mustAlloc(t *testing.T, s *state, p *process, d int, n uint64) {
	t.Helper()
	if !s.alloc(p, d, n) {
		t.Fatalf("alloc %d on %d for pid %d: out of memory", n, d, p.pid)
	}
}

// TestMemoryAccountingProperty runs random allocations and frees of several
// processes in two groups and checks, after every step, that the device,
// process and group counts agree with a model, that peaks are the maxima
// the model saw, and that freeing everything returns all memory.
func TestMemoryAccountingProperty(t *testing.T) {
	s := newState(testDevices(1), t0)
	total := s.devs[0].cfg.TotalBytes
	rng := rand.New(rand.NewSource(1))
	pids := []int{11, 12, 13, 21, 22}
	group := func(pid int) string { return map[bool]string{true: "a", false: "b"}[pid < 20] }
	procs := make(map[int]*process)
	held := make(map[int]uint64)
	peakGroup := make(map[string]uint64)
	var peakUsed uint64
	for _, pid := range pids {
		procs[pid] = s.attach(pid, group(pid))
	}
	for step := range 5000 {
		pid := pids[rng.Intn(len(pids))]
		n := uint64(rng.Int63n(int64(total/4))) + 1
		if rng.Intn(2) == 0 {
			ok := s.alloc(procs[pid], 0, n)
			if want := n <= total-sum(held, nil); ok != want {
				t.Fatalf("step %d: alloc %d ok=%v, want %v", step, n, ok, want)
			}
			if ok {
				held[pid] += n
			}
		} else {
			n = min(n, held[pid])
			if err := s.free(procs[pid], 0, n); err != nil {
				t.Fatalf("step %d: free %d of %d: %v", step, n, held[pid], err)
			}
			held[pid] -= n
		}
		peakUsed = max(peakUsed, sum(held, nil))
		for _, g := range []string{"a", "b"} {
			peakGroup[g] = max(peakGroup[g], sum(held, func(pid int) bool { return group(pid) == g }))
		}
	}
	dr := &Driver{st: s}
	st := dr.Stats().Devices[0]
	if st.UsedBytes != sum(held, nil) || st.PeakUsedBytes != peakUsed {
		t.Errorf("device used/peak %d/%d, want %d/%d", st.UsedBytes, st.PeakUsedBytes, sum(held, nil), peakUsed)
	}
	for _, g := range []string{"a", "b"} {
		if got := dr.GroupPeak(0, g); got != peakGroup[g] {
			t.Errorf("group %s peak %d, want %d", g, got, peakGroup[g])
		}
	}
	for _, pid := range pids {
		if err := s.free(procs[pid], 0, held[pid]); err != nil {
			t.Fatal(err)
		}
		if err := s.free(procs[pid], 0, 1); err == nil {
			t.Errorf("pid %d: freeing more than held succeeded", pid)
		}
	}
	after := dr.Stats().Devices[0]
	if after.UsedBytes != 0 || after.Groups["a"].Bytes != 0 || after.Groups["b"].Bytes != 0 {
		t.Errorf("after freeing everything: %+v", after)
	}
	dr.ResetPeaks()
	if p := dr.Peak(0); p != 0 {
		t.Errorf("peak after ResetPeaks with nothing held = %d, want 0", p)
	}
}

// sum adds the held bytes of the pids keep accepts (all if nil).
func sum(held map[int]uint64, keep func(int) bool) uint64 {
	var n uint64
	for pid, b := range held {
		if keep == nil || keep(pid) {
			n += b
		}
	}
	return n
}

func TestSetGroupMovesHeldMemory(t *testing.T) {
	s := newState(testDevices(1), t0)
	dr := &Driver{st: s}
	p := s.attach(5, "")
	mustAlloc(t, s, p, 0, 300)
	dr.SetGroup(5, "x")
	mustAlloc(t, s, p, 0, 100)
	dr.SetGroup(5, "y")
	g := dr.Stats().Devices[0].Groups
	want := map[string]GroupStats{"x": {Bytes: 0, PeakBytes: 400, PeakTotalBytes: 400}, "y": {Bytes: 400, PeakBytes: 400, PeakTotalBytes: 400}}
	if diff := cmp.Diff(want, g); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
}
