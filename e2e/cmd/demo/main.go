//go:build e2e

// Command demo runs the end-to-end demo: a local control plane with
// simulated DGX A100 nodes and an Ascend node, sample Volcano Jobs sharing
// GPUs and NPUs, and the final tables printed by the kubectl plugin
// (`kubectl vshare cards`, `pods`, `fit`). `make demo` runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/vgpushare/vshare/e2e/demo"
)

func main() {
	o := demo.Options{Out: os.Stdout, Log: os.Stderr}
	flag.IntVar(&o.Nodes, "nodes", 3, "simulated DGX A100 nodes")
	flag.BoolVar(&o.Keep, "keep", false, "keep the cluster running after the report until interrupted; prints the kubeconfig path")
	flag.StringVar(&o.WorkDir, "work-dir", "", "work directory (logs, kubeconfig); default a new temporary directory")
	flag.BoolVar(&o.RealNode, "real-node", false, "add a real node (kubelet, containerd, the chart from images built here; needs root and Debian's containerd)")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if err := demo.Run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}
