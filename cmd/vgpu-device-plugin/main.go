// Command vgpu-device-plugin is the NVIDIA node agent of the vGPU sharing
// stack: kubelet device plugin, node registration, Allocate for libvgpu,
// health and metrics. See package agent for the flags.
package main

import (
	"os"

	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/vgpu-device-plugin/agent"
)

func main() {
	os.Exit(nodeagent.Main("vgpu-device-plugin", os.Args[1:], agent.NewOptions(), agent.Run))
}
