//go:build e2e

package throughput

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestWriteCSVLeavesTimesNotReachedEmpty(t *testing.T) {
	rs := []*Result{
		{Scheduler: SchedulerFloor, Nodes: 2, Pods: 4, BoundPods: 4, RunningPods: 4, AdmittedPods: 4,
			Bound: 1500 * time.Millisecond, Running: 2 * time.Second, Admitted: 2 * time.Second, P50: time.Second, P99: 2 * time.Second},
		{Scheduler: SchedulerStock, Nodes: 2, Pods: 4, AgentDelay: 500 * time.Millisecond, Incomplete: true, BoundPods: 4, RunningPods: 1, AdmittedPods: 1,
			Bound: 3 * time.Second, Running: 4 * time.Second, Admitted: 4 * time.Second, P50: 4 * time.Second, P99: 4 * time.Second},
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, rs); err != nil {
		t.Fatal(err)
	}
	want := CSVHeader + "\n" +
		"floor,2,4,1.500,2.000,2.000,1.000,2.000,0.000,1\n" +
		"stock,2,4,3.000,,,,,0.500,1\n"
	if b.String() != want {
		t.Errorf("CSV:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestBreakdownPerNodeChains(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	tr := newTracker(nil, 4, false)
	// n1: a bound at 1, admitted at 2; b bound at 3 (after a), admitted at 4.
	// n2: c bound at 1, d bound at 1.5 while c is still pending, both
	// admitted at 2.
	for name, v := range map[string]struct {
		node                string
		made, bound, admitd float64
	}{
		"a": {"n1", 0, 1, 2}, "b": {"n1", 0, 3, 4}, "c": {"n2", 0, 1, 2}, "d": {"n2", 0.5, 1.5, 2},
	} {
		tr.made[name], tr.bound[name], tr.adm[name], tr.node[name] = at(v.made), at(v.bound), at(v.admitd), v.node
	}
	b := tr.breakdown(t0)
	if b.Overlapped != 1 {
		t.Errorf("Overlapped = %d, want 1 (d bound beside pending c)", b.Overlapped)
	}
	if b.NodeChainMax != 3*time.Second || b.LongestChainPods != 2 {
		t.Errorf("longest chain %s with %d pods, want 3s with 2 (n1: bound at 1, last admitted at 4)", b.NodeChainMax, b.LongestChainPods)
	}
	if b.AdmittedToNextBoundP50 != time.Second {
		t.Errorf("admitted->next bound p50 = %s, want 1s (a admitted at 2, b bound at 3)", b.AdmittedToNextBoundP50)
	}
	if b.NodesUsed != 2 || b.PodsPerNodeMax != 2 || b.Created != 500*time.Millisecond {
		t.Errorf("nodes %d, pods per node max %d, last created %s; want 2, 2, 500ms", b.NodesUsed, b.PodsPerNodeMax, b.Created)
	}
}

// TestSummaryTakesEachRoundsOwnFloor: a run's ratio is to the floor of
// its round, not to the last floor of the invocation, and a run that did
// not finish counts in no ratio.
func TestSummaryTakesEachRoundsOwnFloor(t *testing.T) {
	done := func(s string, round int, delay, running, admitted time.Duration) *Result {
		return &Result{Scheduler: s, Round: round, Pods: 10, BoundPods: 10, RunningPods: 10, AdmittedPods: 10,
			AgentDelay: delay, Running: running, Admitted: admitted}
	}
	unfinished := done(SchedulerOursAlt, 2, 0, 30*time.Second, 30*time.Second)
	unfinished.AdmittedPods = 9
	rs := []*Result{
		done(SchedulerFloor, 1, 0, 10*time.Second, 10*time.Second),
		done(SchedulerOurs, 1, 0, 12*time.Second, 12*time.Second),
		done(SchedulerOursAlt, 1, 0, 16*time.Second, 15*time.Second),
		done(SchedulerFloor, 2, 0, 20*time.Second, 20*time.Second),
		done(SchedulerOurs, 2, 0, 22*time.Second, 22*time.Second),
		unfinished,
		done(SchedulerFloor, 3, 0, 5*time.Second, 5*time.Second),
		done(SchedulerOurs, 3, 0, 7*time.Second, 7*time.Second),
		done(SchedulerOursAlt, 3, 0, 9*time.Second, 9*time.Second),
	}
	var b bytes.Buffer
	Summary(&b, rs)
	for _, want := range []string{
		"Over 3 rounds (the floor's all Running by round: 10s, 20s, 5s)",
		"| ours | 0s | 3 | 1.20x | 1.10x | 1.40x | 1.20x, 1.10x, 1.40x |",
		"| ours-alt | 0s | 2 | 1.65x | 1.50x | 1.80x | 1.50x, 1.80x |",
	} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
	var one bytes.Buffer
	Summary(&one, rs[:3])
	if one.Len() != 0 {
		t.Errorf("one round: want no summary, got:\n%s", one.String())
	}
	var report bytes.Buffer
	Report(&report, rs)
	if !strings.Contains(report.String(), "| 2 | ours | 0s | 0 | 10 | 0s | 22s | 22s | 1.10x |") {
		t.Errorf("report: round 2's ours should be 1.10x its own floor:\n%s", report.String())
	}
}
