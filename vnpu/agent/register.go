package agent

import (
	"errors"
	"strconv"
	"time"

	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/nodeagent/registrar"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// RegistrarOptions configure a Registrar.
type RegistrarOptions struct {
	// Node is this node's name. Required.
	Node string
	// Inventory is the node's chips. Required.
	Inventory *Inventory
	// Patcher writes the node (nodeagent/kube.Patcher implements it).
	// Required.
	Patcher registrar.NodePatcher
	// HandshakeInterval is how often the handshake is renewed; 0 means
	// registrar.DefaultHandshakeInterval. Must be below
	// registrar.MaxHandshakeInterval.
	HandshakeInterval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Registrar keeps the node's registration and handshake current, renewing
// the handshake every interval as HAMi's plugin does (nodeagent/registrar).
// Create it with NewRegistrar, feed it the node with ObserveNode and call
// Run once.
type Registrar = registrar.Registrar

// NewRegistrar validates the options and returns a Registrar writing
// hami.io/node-register-<commonWord> and hami-vnpu-core, and renewing
// hami.io/node-handshake-<commonWord>.
func NewRegistrar(opts RegistrarOptions) (*Registrar, error) {
	if opts.Node == "" || opts.Inventory == nil || opts.Patcher == nil {
		return nil, errors.New("registrar: Node, Inventory and Patcher are required")
	}
	reg, err := opts.Inventory.Register()
	if err != nil {
		return nil, err
	}
	cw := opts.Inventory.Entry().CommonWord
	keys := ascendproto.KeysFor(cw)
	desired := map[string]string{
		keys.Register:                      reg,
		ascendproto.AnnotationNodeHAMiCore: strconv.FormatBool(opts.Inventory.HAMiCore()),
	}
	return registrar.New(registrar.Options{
		Node: opts.Node, What: "Ascend", Desired: func() map[string]string { return desired },
		HandshakeKey: keys.Handshake, Handshake: registrar.Renew, Patcher: opts.Patcher,
		HandshakeInterval: opts.HandshakeInterval, Clock: opts.Clock, LogValues: []any{"chip", cw},
	})
}
