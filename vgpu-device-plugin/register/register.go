package register

import (
	"context"
	"errors"
	"time"

	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/registrar"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// NodePatcher merges annotations into a node's.
type NodePatcher interface {
	PatchNodeAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

// Encode renders the registration annotation: the inventory's cards in the
// agent's memory unit, with their health.
func Encode(inv *nvidia.Inventory, healthy func(uuid string) bool) string {
	cards := make([]vgpuproto.Card, len(inv.Cards))
	for i, c := range inv.Cards {
		cards[i] = vgpuproto.Card{UUID: c.UUID, Count: c.Count, MemMiB: inv.ToUnit(c.MemoryMiB), Type: c.Type,
			Healthy: healthy(c.UUID), Mode: c.Mode, NUMA: int32(c.NUMANode)}
	}
	return vgpuproto.EncodeRegister(cards)
}

// EncodeScores renders hami.io/node-nvidia-score for the inventory's cards
// (nvidia.Inventory.Scores, on HAMi's scale); "" when the driver reported
// no link between them, so that nothing is published.
func EncodeScores(inv *nvidia.Inventory) string {
	scores := inv.Scores()
	if scores == nil {
		return ""
	}
	uuids := make([]string, len(inv.Cards))
	for i, c := range inv.Cards {
		uuids[i] = c.UUID
	}
	s, err := vgpuproto.EncodeScores(uuids, scores)
	if err != nil { // cannot happen: Scores is n x n
		klog.ErrorS(err, "Cannot encode the cards' link scores")
		return ""
	}
	return s
}

// Options configure a Registrar.
type Options struct {
	// Node is this node's name. Required.
	Node string
	// Inventory returns the current cards. Required.
	Inventory func() *nvidia.Inventory
	// Healthy reports a card's health. Required.
	Healthy func(uuid string) bool
	// Geometry returns a mig-mode card's current geometry group ("" for
	// none); nil means MIG geometries are not reported.
	Geometry func(card nvidia.Card) (string, error)
	// Changed returns a channel closed when the inventory, health or a MIG
	// geometry may have changed; call it before reading them. Required.
	Changed func() <-chan struct{}
	// Patcher writes the node. Required.
	Patcher NodePatcher
	// HandshakeInterval is the least time between two handshake reports;
	// 0 means registrar.DefaultHandshakeInterval. Must be below
	// registrar.MaxHandshakeInterval.
	HandshakeInterval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Registrar keeps the node's registration current (nodeagent/registrar,
// answering Volcano's handshake). Create it with New, feed it the node with
// ObserveNode and call Run once.
type Registrar = registrar.Registrar

// New validates the options and returns a Registrar.
func New(opts Options) (*Registrar, error) {
	if opts.Node == "" || opts.Inventory == nil || opts.Healthy == nil || opts.Changed == nil || opts.Patcher == nil {
		return nil, errors.New("registrar: Node, Inventory, Healthy, Changed and Patcher are required")
	}
	return registrar.New(registrar.Options{
		Node: opts.Node, What: "vGPU", Desired: func() map[string]string { return desired(opts) },
		Changed: opts.Changed, HandshakeKey: vgpuproto.AnnotationHandshake, Handshake: registrar.Answer,
		Patcher: opts.Patcher, HandshakeInterval: opts.HandshakeInterval, Clock: opts.Clock,
	})
}

// desired are the registration annotations as they should be.
func desired(opts Options) map[string]string {
	inv := opts.Inventory()
	out := map[string]string{vgpuproto.AnnotationRegister: Encode(inv, opts.Healthy)}
	if s := EncodeScores(inv); s != "" {
		out[vgpuproto.AnnotationHAMiScore] = s
	}
	if opts.Geometry == nil {
		return out
	}
	var mig []vgpuproto.MIGGeometry
	for _, c := range inv.Cards {
		if c.Mode != config.OperatingModeMIG {
			continue
		}
		g, err := opts.Geometry(c)
		if err != nil {
			klog.ErrorS(err, "Cannot read the card's MIG geometry", "uuid", c.UUID)
		}
		mig = append(mig, vgpuproto.MIGGeometry{UUID: c.UUID, Group: g})
	}
	if mig != nil {
		out[vgpuproto.AnnotationMIGGeometry] = vgpuproto.EncodeMIGGeometry(mig)
	}
	return out
}
