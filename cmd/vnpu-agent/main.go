// Command vnpu-agent is a simulated HAMi Ascend node agent for tests and
// the demo: node registration, handshake, and the kubelet device plugin
// for one chip type of the device ConfigMap's vnpus section, with chips
// described by flags. See package vnpu/agent.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/pflag"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/vnpu/agent"
)

func main() {
	opts := agent.NewOptions()
	fs := pflag.NewFlagSet("vnpu-agent", pflag.ExitOnError)
	opts.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(os.Args[1:]) // ExitOnError

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := agent.Run(ctx, opts); err != nil {
		klog.Flush()
		fmt.Fprintln(os.Stderr, "vnpu-agent:", err)
		os.Exit(1)
	}
	klog.Flush()
}
