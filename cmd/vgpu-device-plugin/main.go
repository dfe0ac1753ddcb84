// Command vgpu-device-plugin is the NVIDIA node agent of the vGPU sharing
// stack: kubelet device plugin, node registration, Allocate for libvgpu,
// health and metrics. See package agent for the flags.
//
// `vgpu-device-plugin install-libvgpu --to <dir>/libvgpu.so` instead copies
// the image's libvgpu.so to the host atomically (package install; the
// chart's init container runs it, the image has no shell).
package main

import (
	"fmt"
	"os"

	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/vgpu-device-plugin/agent"
	"github.com/vgpushare/vshare/vgpu-device-plugin/install"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == install.Command {
		os.Exit(installLibvgpu(os.Args[2:]))
	}
	os.Exit(nodeagent.Main("vgpu-device-plugin", os.Args[1:], agent.NewOptions(), agent.Run))
}

// installLibvgpu runs the install-libvgpu subcommand: 2 for a bad command
// line, 1 when the copy fails.
func installLibvgpu(args []string) int {
	a, err := install.ParseArgs(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := install.File(a.From, a.To); err != nil {
		fmt.Fprintln(os.Stderr, "vgpu-device-plugin "+install.Command+":", err)
		return 1
	}
	return 0
}
