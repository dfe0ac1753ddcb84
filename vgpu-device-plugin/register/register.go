package register

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/nodeannot"
	"github.com/vgpushare/vshare/protocol/vgpu"
	"github.com/vgpushare/vshare/vgpu-device-plugin/internal/notify"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

const (
	// DefaultHandshakeInterval keeps reports well inside upstream's 60 s.
	DefaultHandshakeInterval = 30 * time.Second
	// MaxHandshakeInterval is upstream's deadline for answering a request.
	MaxHandshakeInterval = 60 * time.Second
	maxRetryDelay        = 30 * time.Second
)

// NodePatcher merges annotations into a node's.
type NodePatcher interface {
	PatchNodeAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

// Encode renders the registration annotation: the inventory's cards in the
// agent's memory unit, with their health.
func Encode(inv *nvidia.Inventory, healthy func(uuid string) bool) string {
	cards := make([]vgpu.Card, len(inv.Cards))
	for i, c := range inv.Cards {
		cards[i] = vgpu.Card{UUID: c.UUID, Count: c.Count, MemMiB: inv.ToUnit(c.MemoryMiB), Type: c.Type,
			Healthy: healthy(c.UUID), Mode: c.Mode}
	}
	return vgpu.EncodeRegister(cards)
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
	// 0 means DefaultHandshakeInterval. Must be below MaxHandshakeInterval.
	HandshakeInterval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Registrar keeps the node's registration current. Create it with New, feed
// it the node with ObserveNode and call Run once.
type Registrar struct {
	opts Options

	mu   sync.Mutex
	node *v1.Node
	sig  notify.Signal
	// written and writtenRV: what the last patch wrote, and the node's
	// resourceVersion before it; while the observed node still has that
	// resourceVersion, the informer has not caught up with the patch.
	written   map[string]string
	writtenRV string
	reported  time.Time
}

// New validates the options and returns a Registrar.
func New(opts Options) (*Registrar, error) {
	if opts.Node == "" || opts.Inventory == nil || opts.Healthy == nil || opts.Changed == nil || opts.Patcher == nil {
		return nil, errors.New("registrar: Node, Inventory, Healthy, Changed and Patcher are required")
	}
	if opts.HandshakeInterval == 0 {
		opts.HandshakeInterval = DefaultHandshakeInterval
	}
	if opts.HandshakeInterval < 0 || opts.HandshakeInterval >= MaxHandshakeInterval {
		return nil, errors.New("registrar: HandshakeInterval must be in (0, 60s)")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Registrar{opts: opts}, nil
}

// ObserveNode records the node as the informer last saw it.
func (r *Registrar) ObserveNode(node *v1.Node) {
	if node == nil || node.Name != r.opts.Node {
		return
	}
	r.mu.Lock()
	r.node = node
	r.mu.Unlock()
	r.sig.Broadcast()
}

// Run keeps the registration current until ctx ends. It waits for the first
// observed node before writing.
func (r *Registrar) Run(ctx context.Context) {
	delay := time.Second
	for {
		changed, observed := r.opts.Changed(), r.sig.C()
		wait, err := r.sync(ctx)
		if err != nil {
			klog.ErrorS(err, "Cannot update the node's vGPU registration; retrying", "node", r.opts.Node, "delay", delay)
			wait, delay = delay, min(2*delay, maxRetryDelay)
		} else {
			delay = time.Second
		}
		var timer clock.Timer
		var fire <-chan time.Time
		if wait > 0 {
			timer = r.opts.Clock.NewTimer(wait)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-changed:
		case <-observed:
		case <-fire:
		}
		if timer != nil {
			timer.Stop()
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// sync writes what differs and returns how long until a deferred handshake
// answer is due (0: nothing due).
func (r *Registrar) sync(ctx context.Context) (time.Duration, error) {
	r.mu.Lock()
	node := r.node
	r.mu.Unlock()
	if node == nil {
		return 0, nil
	}
	patch, current := nodeannot.Diff(node, r.writtenRV, r.written, r.desired())
	now := r.opts.Clock.Now()
	var wait time.Duration
	hs := current[vgpu.AnnotationHandshake]
	if len(patch) > 0 || !strings.HasPrefix(hs, vgpu.HandshakeReported) {
		due := r.reported.Add(r.opts.HandshakeInterval)
		if len(patch) > 0 || r.reported.IsZero() || !now.Before(due) {
			patch[vgpu.AnnotationHandshake] = vgpu.HandshakeReported + now.Format(vgpu.HandshakeLayout)
		} else {
			wait = due.Sub(now)
		}
	}
	if len(patch) == 0 {
		return wait, nil
	}
	if err := r.opts.Patcher.PatchNodeAnnotations(ctx, r.opts.Node, patch); err != nil {
		return 0, err
	}
	r.written, r.writtenRV = patch, node.ResourceVersion
	if _, ok := patch[vgpu.AnnotationHandshake]; ok {
		r.reported = now
	}
	klog.V(2).InfoS("Updated the node's vGPU registration", "node", r.opts.Node, "keys", len(patch),
		"answeredHandshake", hs != "" && !strings.HasPrefix(hs, vgpu.HandshakeReported))
	return wait, nil
}

// desired are the registration annotations as they should be.
func (r *Registrar) desired() map[string]string {
	inv := r.opts.Inventory()
	out := map[string]string{vgpu.AnnotationRegister: Encode(inv, r.opts.Healthy)}
	if r.opts.Geometry == nil {
		return out
	}
	var mig []vgpu.MIGGeometry
	for _, c := range inv.Cards {
		if c.Mode != config.OperatingModeMIG {
			continue
		}
		g, err := r.opts.Geometry(c)
		if err != nil {
			klog.ErrorS(err, "Cannot read the card's MIG geometry", "uuid", c.UUID)
		}
		mig = append(mig, vgpu.MIGGeometry{UUID: c.UUID, Group: g})
	}
	if mig != nil {
		out[vgpu.AnnotationMIGGeometry] = vgpu.EncodeMIGGeometry(mig)
	}
	return out
}
