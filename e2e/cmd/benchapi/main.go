//go:build e2e

// Command benchapi runs the in-process vGPU benchmark with Volcano's
// built-in vGPU throttled as it ships and talking to a real kube-apiserver
// (package e2e/benchapi). `make bench` runs it; go test's output goes to
// stdout, progress to stderr.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/vgpushare/vshare/e2e/benchapi"
)

func main() {
	o := benchapi.Options{Out: os.Stdout, Log: os.Stderr}
	nodes := flag.String("nodes", "1000,5000", "cluster sizes (nodes of 8 cards), comma-separated")
	impls := flag.String("impls", "builtin,ours", "implementations, comma-separated (builtin is the throttled built-in)")
	flag.IntVar(&o.Pods, "pods", 500, "pods per session")
	flag.IntVar(&o.Count, "count", 1, "go test -count")
	flag.Parse()
	for _, f := range strings.Split(*nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchapi: --nodes=%q: %q is not a number\n", *nodes, f)
			os.Exit(2)
		}
		o.Nodes = append(o.Nodes, n)
	}
	o.Impls = strings.Split(*impls, ",")
	if err := o.Validate(); err != nil {
		fmt.Fprintln(os.Stderr, "benchapi:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := benchapi.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "benchapi:", err)
		os.Exit(1)
	}
}
