//go:build e2e

package throughput

import (
	"bytes"
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
		"floor,2,4,1.500,2.000,2.000,1.000,2.000,0.000\n" +
		"stock,2,4,3.000,,,,,0.500\n"
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
