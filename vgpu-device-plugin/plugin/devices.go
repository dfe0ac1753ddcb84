package plugin

import (
	"strconv"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// VirtualDeviceID names the i-th virtual device of a card, as
// volcano-vgpu-device-plugin does.
func VirtualDeviceID(uuid string, i int) string {
	return uuid + "-" + strconv.Itoa(i)
}

// VirtualDevices lists Count virtual devices per card with the card's health
// and, when numa is set and known, its NUMA node.
func VirtualDevices(inv *nvidia.Inventory, healthy func(uuid string) bool, numa bool) []*pluginapi.Device {
	n := 0
	for _, c := range inv.Cards {
		n += int(c.Count)
	}
	out := make([]*pluginapi.Device, 0, n)
	for _, c := range inv.Cards {
		h := pluginapi.Healthy
		if !healthy(c.UUID) {
			h = pluginapi.Unhealthy
		}
		var topo *pluginapi.TopologyInfo
		if numa && c.NUMANode >= 0 {
			topo = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(c.NUMANode)}}}
		}
		for i := 0; i < int(c.Count); i++ {
			out = append(out, &pluginapi.Device{ID: VirtualDeviceID(c.UUID, i), Health: h, Topology: topo})
		}
	}
	return out
}
