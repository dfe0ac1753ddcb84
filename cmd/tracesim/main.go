// Command tracesim runs the FGD placement-quality experiment (package
// bench/quality, docs/quality.md) on one node list and one pod list:
//
//	go run ./cmd/tracesim --nodes openb_node_list_gpu_node.csv \
//	    --pods openb_pod_list_default.csv --policy fragment --seeds 42-51
//
// It prints the CSV header and one row per policy,
// "trace,policy,seeds,alloc100,alloc130,unalloc130": the allocated GPU %
// at 100% and 130% arrival and the unallocated GPU % at 130%, averaged
// over the seeds; the last line of its output always ends with the
// unallocated GPU % at 130%. The seed spread of that value (standard
// deviation and 95% confidence interval of the mean, as in
// bench/results/quality.csv) goes to stderr. The trace is the pod file's
// base name without "openb_pod_list_" and ".csv".
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/vgpushare/vshare/bench/quality"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the command: it returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tracesim", flag.ContinueOnError)
	fs.SetOutput(stderr)
	nodes := fs.String("nodes", "", "node list CSV (sn,cpu_milli,memory_mib,gpu,model), e.g. openb_node_list_gpu_node.csv")
	pods := fs.String("pods", "", "pod list CSV (name,cpu_milli,memory_mib,num_gpu,gpu_milli[,gpu_spec]), e.g. openb_pod_list_default.csv")
	policy := fs.String("policy", "fragment", "policy, or a comma-separated list: "+strings.Join(policyNames(), ", "))
	seeds := fs.String("seeds", "42-51", "seeds: N, N-M or a comma-separated list")
	parallel := fs.Int("parallel", 1, "policies run at once")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *nodes == "" || *pods == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "tracesim: --nodes and --pods are required, and no other arguments")
		fs.Usage()
		return 2
	}
	if err := simulate(*nodes, *pods, *policy, *seeds, *parallel, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "tracesim:", err)
		return 1
	}
	return 0
}

func policyNames() []string {
	return append(append(append([]string(nil), quality.OurPolicies()...), quality.BuiltinPolicies()...), quality.ReferencePolicies()...)
}

func simulate(nodes, pods, policies, seedList string, parallel int, out, log io.Writer) error {
	seeds, err := quality.ParseSeeds(seedList)
	if err != nil {
		return err
	}
	t, err := quality.LoadTraceFiles(nodes, pods)
	if err != nil {
		return err
	}
	var jobs []quality.Job
	for _, p := range strings.Split(policies, ",") {
		if p = strings.TrimSpace(p); p != "" {
			jobs = append(jobs, quality.Job{Trace: t, Policy: p})
		}
	}
	if len(jobs) == 0 {
		return fmt.Errorf("--policy: no policy given")
	}
	results, err := quality.EvaluateAll(jobs, seeds, parallel, nil)
	if err != nil {
		return err
	}
	for _, r := range results {
		s := quality.SpreadOf(r.SeedUnalloc130())
		fmt.Fprintf(log, "tracesim: %s on %s: unallocated GPU %% at 130%%: %.2f, sd %.2f, 95%% CI ±%.2f over %d seeds\n",
			r.Policy, r.Trace, r.Unalloc130(), s.SD, s.CI, s.N)
	}
	// The six core columns only: the last field stays unalloc130.
	return quality.WriteCSVColumns(out, quality.CoreColumns(), results)
}
