//go:build e2e

// Command throughput runs the end-to-end scheduling benchmark (package
// e2e/throughput) with our scheduler and Volcano v1.10.0's stock one, and
// prints a markdown table. `make bench-e2e` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/vgpushare/vshare/e2e/throughput"
)

func main() {
	o := throughput.Options{Log: os.Stderr}
	flag.IntVar(&o.Nodes, "nodes", 200, "simulated DGX A100 nodes, each with a node agent and a fake kubelet")
	flag.IntVar(&o.Jobs, "jobs", 100, "Volcano Jobs (gangs) in the burst")
	flag.IntVar(&o.PodsPerJob, "pods-per-job", 20, "pods per Job")
	flag.DurationVar(&o.Idle, "idle", time.Minute, "how long to count node PATCHes after the burst")
	flag.DurationVar(&o.Timeout, "timeout", 30*time.Minute, "longest wait for the burst")
	which := flag.String("schedulers", "ours,stock", "ours, stock, or both comma-separated")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var results []*throughput.Result
	for _, s := range splitComma(*which) {
		run := o
		switch s {
		case "ours":
		case "stock":
			run.Stock = true
		default:
			fmt.Fprintf(os.Stderr, "throughput: --schedulers=%q: want ours, stock or both\n", *which)
			os.Exit(2)
		}
		r, err := throughput.Run(ctx, run)
		if err != nil {
			fmt.Fprintf(os.Stderr, "throughput (%s): %v\n", s, err)
			os.Exit(1)
		}
		results = append(results, r)
		throughput.Details(os.Stdout, r)
	}
	fmt.Println()
	throughput.Report(os.Stdout, results)
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}
