//go:build e2e

package throughput

// What a run's results are written as: the comparison table, the summary
// over rounds, the CSV and the per-run details.

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vgpushare/vshare/e2e/framework"
)

// Report writes a comparison table of results.
func Report(w io.Writer, rs []*Result) {
	fmt.Fprintf(w, "| round | scheduler | agent delay | nodes | pods | all bound | all Running | all admitted | all admitted / floor's all Running | p50 / p99 admitted | scheduler requests per bound pod | agent requests per bound pod | node PATCHes per bound pod (scheduler, agents) | idle node PATCHes/min |\n")
	fmt.Fprintf(w, "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	floors := roundFloors(rs)
	for _, r := range rs {
		floor := floors[r.Round]
		var sched, agent, schedNode, agentNode int
		for k, n := range r.Requests {
			switch {
			case strings.HasPrefix(k.Client, "vc-scheduler"):
				sched += n
				if k.Verb == "patch" && strings.HasPrefix(k.Resource, "nodes") {
					schedNode += n
				}
			case k.Client == "vgpu-device-plugin":
				agent += n
				if k.Verb == "patch" && strings.HasPrefix(k.Resource, "nodes") {
					agentNode += n
				}
			}
		}
		var idle float64
		for _, n := range r.IdleNodePatches {
			idle += n
		}
		p := float64(max(r.BoundPods, 1))
		pods := fmt.Sprint(r.Pods)
		if r.Incomplete {
			pods = fmt.Sprintf("%d (after the %s timeout: %d bound, %d Running, %d admitted)", r.Pods, r.Timeout, r.BoundPods, r.RunningPods, r.AdmittedPods)
		}
		perPod := func(n int) string {
			if r.BoundPods == 0 {
				return fmt.Sprintf("%d (none bound)", n)
			}
			return strconv.FormatFloat(float64(n)/p, 'f', 2, 64)
		}
		ratio := "-"
		if x, ok := r.ratio(floor); ok {
			ratio = fmt.Sprintf("%.2fx", x)
		}
		delay := "-"
		if r.Scheduler != SchedulerFloor {
			delay = r.AgentDelay.String()
		}
		fmt.Fprintf(w, "| %d | %s | %s | %d | %s | %s | %s | %s | %s | %s / %s | %s | %s | %s, %s | %.0f |\n",
			r.Round, r.Scheduler, delay, r.Nodes, pods, r.reached(r.Bound, r.BoundPods), r.reached(r.Running, r.RunningPods),
			r.reached(r.Admitted, r.AdmittedPods), ratio, r.reached(r.P50, r.AdmittedPods), r.reached(r.P99, r.AdmittedPods),
			perPod(sched), perPod(agent), perPod(schedNode), perPod(agentNode), idle)
	}
}

// roundFloors returns, by round, the last floor run of the round in
// which every pod reached Running.
func roundFloors(rs []*Result) map[int]*Result {
	floors := map[int]*Result{}
	for _, r := range rs {
		if r.Scheduler == SchedulerFloor && r.RunningPods == r.Pods {
			floors[r.Round] = r
		}
	}
	return floors
}

// ratio is r's time to all admitted over floor's time to all Running;
// false when r is the floor, either did not finish, or there is none.
func (r *Result) ratio(floor *Result) (float64, bool) {
	if floor == nil || r == floor || r.Scheduler == SchedulerFloor || r.AdmittedPods < r.Pods || floor.Running <= 0 {
		return 0, false
	}
	return r.Admitted.Seconds() / floor.Running.Seconds(), true
}

// Summary writes, when the runs were repeated, each run's ratio to its
// round's floor over the rounds: median, lowest, highest and every
// round's, in the order the runs were first made. Comparing two builds or
// settings by their ratios to a floor measured minutes apart on the same
// machine leaves out most of what the machine's other load changes
// between runs; the spread over rounds says how much is left.
func Summary(w io.Writer, rs []*Result) {
	floors := roundFloors(rs)
	type key struct {
		scheduler string
		delay     time.Duration
	}
	var order []key
	ratios := map[key][]float64{}
	rounds := map[int]bool{}
	for _, r := range rs {
		rounds[r.Round] = true
		x, ok := r.ratio(floors[r.Round])
		if !ok {
			continue
		}
		k := key{r.Scheduler, r.AgentDelay}
		if _, seen := ratios[k]; !seen {
			order = append(order, k)
		}
		ratios[k] = append(ratios[k], x)
	}
	if len(rounds) < 2 {
		return
	}
	var floorTimes []string
	for round := 1; round <= len(rounds); round++ {
		if f := floors[round]; f != nil {
			floorTimes = append(floorTimes, ms(f.Running))
		} else {
			floorTimes = append(floorTimes, "not reached")
		}
	}
	fmt.Fprintf(w, "\nOver %d rounds (the floor's all Running by round: %s), all admitted / the round's floor:\n\n", len(rounds), strings.Join(floorTimes, ", "))
	fmt.Fprintf(w, "| scheduler | agent delay | rounds finished | median | lowest | highest | by round |\n|---|---|---|---|---|---|---|\n")
	for _, k := range order {
		xs := ratios[k]
		each := make([]string, len(xs))
		for i, x := range xs {
			each[i] = fmt.Sprintf("%.2fx", x)
		}
		sorted := slices.Clone(xs)
		slices.Sort(sorted)
		med := sorted[len(sorted)/2]
		if len(sorted)%2 == 0 {
			med = (sorted[len(sorted)/2-1] + sorted[len(sorted)/2]) / 2
		}
		fmt.Fprintf(w, "| %s | %s | %d | %.2fx | %.2fx | %.2fx | %s |\n", k.scheduler, k.delay, len(xs), med, sorted[0], sorted[len(sorted)-1], strings.Join(each, ", "))
	}
}

// reached formats the time to all pods, or "not reached" when only n were.
func (r *Result) reached(d time.Duration, n int) string {
	if n < r.Pods {
		return "not reached"
	}
	return d.Round(time.Millisecond).String()
}

// CSVHeader is the header of WriteCSV's rows.
const CSVHeader = "scheduler,nodes,pods,all_bound_s,all_running_s,all_admitted_s,p50_admitted_s,p99_admitted_s,agent_delay_s,round"

// WriteCSV writes CSVHeader and one row per result; a time not reached (not
// every pod got there before the timeout) is an empty cell, and so are the
// percentiles then (they would cover only the pods that made it).
func WriteCSV(w io.Writer, rs []*Result) error {
	if _, err := fmt.Fprintln(w, CSVHeader); err != nil {
		return err
	}
	for _, r := range rs {
		cell := func(d time.Duration, n int) string {
			if n < r.Pods {
				return ""
			}
			return strconv.FormatFloat(d.Seconds(), 'f', 3, 64)
		}
		if _, err := fmt.Fprintf(w, "%s,%d,%d,%s,%s,%s,%s,%s,%s,%d\n", r.Scheduler, r.Nodes, r.Pods,
			cell(r.Bound, r.BoundPods), cell(r.Running, r.RunningPods), cell(r.Admitted, r.AdmittedPods),
			cell(r.P50, r.AdmittedPods), cell(r.P99, r.AdmittedPods), strconv.FormatFloat(r.AgentDelay.Seconds(), 'f', 3, 64), max(r.Round, 1)); err != nil {
			return err
		}
	}
	return nil
}

// Details writes every client's requests by verb and resource.
func Details(w io.Writer, r *Result) {
	keys := make([]framework.AuditKey, 0, len(r.Requests))
	for k := range r.Requests {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, b := keys[i], keys[j]
		if a.Client != b.Client {
			return a.Client < b.Client
		}
		if a.Verb != b.Verb {
			return a.Verb < b.Verb
		}
		return a.Resource < b.Resource
	})
	fmt.Fprintf(w, "\n%s: %d nodes, %d pods", r.Scheduler, r.Nodes, r.Pods)
	if r.Round > 1 {
		fmt.Fprintf(w, ", round %d", r.Round)
	}
	if r.Scheduler != SchedulerFloor {
		fmt.Fprintf(w, ", agent delay %s per Allocate", r.AgentDelay)
	}
	if r.Incomplete {
		fmt.Fprintf(w, ", NOT FINISHED within the %s timeout", r.Timeout)
	}
	fmt.Fprintf(w, "\n  pods bound %d, Running %d, admitted %d; last bound %s, Running %s, admitted %s; admitted p50 %s p99 %s\n",
		r.BoundPods, r.RunningPods, r.AdmittedPods, ms(r.Bound), ms(r.Running), ms(r.Admitted), ms(r.P50), ms(r.P99))
	b := r.Breakdown
	fmt.Fprintf(w, "  last pod created %s; first bound %s; half bound by %s\n", ms(b.Created), ms(b.FirstBound), ms(b.BoundBy50))
	fmt.Fprintf(w, "  created->bound p50 %s p99 %s; bound->admitted p50 %s p99 %s\n",
		ms(b.CreatedToBoundP50), ms(b.CreatedToBoundP99), ms(b.BoundToAdmittedP50), ms(b.BoundToAdmittedP99))
	fmt.Fprintf(w, "  %d nodes used, pods per node p50 %d max %d; per node: first bind to last admission p50 %s max %s (%d pods there); "+
		"previous pod admitted->next bound p50 %s; pods bound while the node's previous pod was not yet admitted (or had failed): %d\n",
		b.NodesUsed, b.PodsPerNodeP50, b.PodsPerNodeMax, ms(b.NodeChainP50), ms(b.NodeChainMax), b.LongestChainPods,
		ms(b.AdmittedToNextBoundP50), b.Overlapped)
	if len(r.Metrics) > 0 {
		names := make([]string, 0, len(r.Metrics))
		for k := range r.Metrics {
			names = append(names, k)
		}
		sort.Strings(names)
		fmt.Fprintf(w, "  scheduler metrics at the end of the burst:\n")
		for _, k := range names {
			fmt.Fprintf(w, "    %s %g\n", k, r.Metrics[k])
		}
	}
	if len(r.CPU) > 0 {
		names := make([]string, 0, len(r.CPU))
		var total time.Duration
		for k, d := range r.CPU {
			names = append(names, k)
			total += d
		}
		sort.Slice(names, func(i, j int) bool { return r.CPU[names[i]] > r.CPU[names[j]] })
		fmt.Fprintf(w, "  CPU during the burst (user + system, by component; %d nodes' agents summed): %s in all\n", r.Nodes, total.Round(10*time.Millisecond))
		for _, k := range names {
			fmt.Fprintf(w, "    %-32s %8.1f s  %4.1f %%\n", k, r.CPU[k].Seconds(), 100*r.CPU[k].Seconds()/total.Seconds())
		}
	}
	fmt.Fprintf(w, "  requests during the burst (client, verb, resource, count):\n")
	for _, k := range keys {
		fmt.Fprintf(w, "  %-26s %-7s %-22s %d\n", k.Client, k.Verb, k.Resource, r.Requests[k])
	}
	fmt.Fprintf(w, "  idle node PATCHes per minute by client: %v\n", r.IdleNodePatches)
}

func ms(d time.Duration) string { return d.Round(time.Millisecond).String() }
