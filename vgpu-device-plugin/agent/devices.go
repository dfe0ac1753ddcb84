package agent

import (
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// VirtualDevices lists Count virtual devices per card with the card's health
// and, when numa is set and known, its NUMA node.
func VirtualDevices(inv *nvidia.Inventory, healthy func(uuid string) bool, numa bool) []*pluginapi.Device {
	cards := make([]deviceplugin.Card, len(inv.Cards))
	for i, c := range inv.Cards {
		cards[i] = deviceplugin.Card{UUID: c.UUID, Count: int(c.Count), Healthy: healthy(c.UUID)}
		if numa && c.NUMANode >= 0 {
			cards[i].NUMA = &c.NUMANode
		}
	}
	return deviceplugin.VirtualDevices(cards)
}
