package kubectlvshare

import (
	"github.com/vgpushare/vshare/config"
)

// Plugin answers the commands from one cluster's API server.
type Plugin struct {
	clients Clients
	kinds   []*kind
}

// New returns a Plugin reading the cluster through clients, interpreting
// devices under the device configuration cfg (nil: the built-in defaults,
// which is what the scheduler uses without a volcano-vgpu-device-config
// ConfigMap).
func New(clients Clients, cfg *config.Config) (*Plugin, error) {
	kinds, err := newKinds(cfg)
	if err != nil {
		return nil, err
	}
	return &Plugin{clients: clients, kinds: kinds}, nil
}
