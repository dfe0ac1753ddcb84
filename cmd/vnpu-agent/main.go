// Command vnpu-agent is a simulated HAMi Ascend node agent for tests and
// the demo: node registration, handshake, and the kubelet device plugin
// for one chip type of the device ConfigMap's vnpus section, with chips
// described by flags. See package vnpu/agent.
package main

import (
	"os"

	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/vnpu/agent"
)

func main() {
	os.Exit(nodeagent.Main("vnpu-agent", os.Args[1:], agent.NewOptions(), agent.Run))
}
