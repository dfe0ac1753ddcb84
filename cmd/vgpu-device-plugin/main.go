// Command vgpu-device-plugin is the NVIDIA node agent of the vGPU sharing
// stack: kubelet device plugin, node registration, Allocate for libvgpu,
// health and metrics. See package agent for the flags.
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

	"github.com/vgpushare/vshare/vgpu-device-plugin/agent"
)

func main() {
	opts := agent.NewOptions()
	fs := pflag.NewFlagSet("vgpu-device-plugin", pflag.ExitOnError)
	opts.AddFlags(fs)
	klogFlags := flag.NewFlagSet("klog", flag.ExitOnError)
	klog.InitFlags(klogFlags)
	fs.AddGoFlagSet(klogFlags)
	_ = fs.Parse(os.Args[1:]) // ExitOnError

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := agent.Run(ctx, opts); err != nil {
		klog.Flush()
		fmt.Fprintln(os.Stderr, "vgpu-device-plugin:", err)
		os.Exit(1)
	}
	klog.Flush()
}
