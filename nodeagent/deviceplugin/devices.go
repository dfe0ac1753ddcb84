package deviceplugin

import (
	"strconv"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// Card is one physical device an agent shares: ListAndWatch advertises
// Count virtual devices for it.
type Card struct {
	UUID    string
	Count   int
	Healthy bool
	// NUMA is the card's NUMA node; nil when none is reported.
	NUMA *int
}

// VirtualDeviceID names the i-th virtual device of a card, "<UUID>-<i>", as
// volcano-vgpu-device-plugin and HAMi's Ascend device plugin do.
func VirtualDeviceID(uuid string, i int) string {
	return uuid + "-" + strconv.Itoa(i)
}

// VirtualDevices lists Count virtual devices per card with the card's
// health and NUMA node.
func VirtualDevices(cards []Card) []*pluginapi.Device {
	n := 0
	for _, c := range cards {
		n += c.Count
	}
	out := make([]*pluginapi.Device, 0, n)
	for _, c := range cards {
		h := pluginapi.Healthy
		if !c.Healthy {
			h = pluginapi.Unhealthy
		}
		var topo *pluginapi.TopologyInfo
		if c.NUMA != nil {
			topo = &pluginapi.TopologyInfo{Nodes: []*pluginapi.NUMANode{{ID: int64(*c.NUMA)}}}
		}
		for i := 0; i < c.Count; i++ {
			out = append(out, &pluginapi.Device{ID: VirtualDeviceID(c.UUID, i), Health: h, Topology: topo})
		}
	}
	return out
}
