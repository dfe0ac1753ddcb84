package agent

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/internal/nodeannot"
	"github.com/vgpushare/vshare/protocol/ascend"
)

// Handshake timing.
const (
	// DefaultHandshakeInterval is how often the real plugin renews its
	// registration and handshake.
	DefaultHandshakeInterval = 30 * time.Second
	// MaxHandshakeInterval is HAMi's deadline for answering a
	// "Requesting_" handshake.
	MaxHandshakeInterval = 60 * time.Second
	maxRetryDelay        = 30 * time.Second
)

// NodePatcher merges annotations into a node's (kube.Patcher of
// vgpu-device-plugin implements it).
type NodePatcher interface {
	PatchNodeAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

// RegistrarOptions configure a Registrar.
type RegistrarOptions struct {
	// Node is this node's name. Required.
	Node string
	// Inventory is the node's chips. Required.
	Inventory *Inventory
	// Patcher writes the node. Required.
	Patcher NodePatcher
	// HandshakeInterval is how often the handshake is renewed; 0 means
	// DefaultHandshakeInterval. Must be below MaxHandshakeInterval.
	HandshakeInterval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
}

// Registrar keeps the node's registration and handshake current. Create it
// with NewRegistrar, feed it the node with ObserveNode and call Run once.
type Registrar struct {
	opts    RegistrarOptions
	keys    ascend.Keys
	desired map[string]string

	// mu guards node, written by the informer's handler.
	mu   sync.Mutex
	node *v1.Node
	// observed is signalled (never blocking) by ObserveNode.
	observed chan struct{}
	// The fields below belong to the goroutine running Run.
	//
	// written and writtenRV are what the last patch wrote and the node's
	// resourceVersion before it: while the observed node still has that
	// version, the informer has not shown the patch yet.
	written   map[string]string
	writtenRV string
	reported  time.Time
}

// NewRegistrar validates the options and returns a Registrar.
func NewRegistrar(opts RegistrarOptions) (*Registrar, error) {
	if opts.Node == "" || opts.Inventory == nil || opts.Patcher == nil {
		return nil, errors.New("registrar: Node, Inventory and Patcher are required")
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
	reg, err := opts.Inventory.Register()
	if err != nil {
		return nil, err
	}
	keys := ascend.KeysFor(opts.Inventory.Entry().CommonWord)
	return &Registrar{opts: opts, keys: keys, observed: make(chan struct{}, 1), desired: map[string]string{
		keys.Register:                 reg,
		ascend.AnnotationNodeHAMiCore: strconv.FormatBool(opts.Inventory.HAMiCore()),
	}}, nil
}

// ObserveNode records the node as the informer last saw it.
func (r *Registrar) ObserveNode(node *v1.Node) {
	if node == nil || node.Name != r.opts.Node {
		return
	}
	r.mu.Lock()
	r.node = node
	r.mu.Unlock()
	select {
	case r.observed <- struct{}{}:
	default:
	}
}

// Run keeps the registration current until ctx ends. It writes nothing
// before the node was observed.
func (r *Registrar) Run(ctx context.Context) {
	delay := time.Second
	for {
		wait, err := r.sync(ctx)
		if err != nil {
			klog.ErrorS(err, "Cannot update the node's Ascend registration; retrying", "node", r.opts.Node, "delay", delay)
			wait, delay = delay, min(2*delay, maxRetryDelay)
		} else {
			delay = time.Second
		}
		var fire <-chan time.Time
		var timer clock.Timer
		if wait > 0 {
			timer = r.opts.Clock.NewTimer(wait)
			fire = timer.C()
		}
		select {
		case <-ctx.Done():
		case <-r.observed:
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

// sync writes what differs and returns how long until the handshake is
// due again (0: wait for the node).
func (r *Registrar) sync(ctx context.Context) (time.Duration, error) {
	r.mu.Lock()
	node := r.node
	r.mu.Unlock()
	if node == nil {
		return 0, nil
	}
	patch, current := nodeannot.Diff(node, r.writtenRV, r.written, r.desired)
	now := r.opts.Clock.Now()
	hs := current[r.keys.Handshake]
	due := r.reported.Add(r.opts.HandshakeInterval)
	if len(patch) == 0 && !r.reported.IsZero() && now.Before(due) && strings.HasPrefix(hs, ascend.HandshakeReported) {
		return due.Sub(now), nil // registration current, handshake fresh
	}
	patch[r.keys.Handshake] = ascend.HandshakeReported + now.Format(ascend.HandshakeLayout)
	if err := r.opts.Patcher.PatchNodeAnnotations(ctx, r.opts.Node, patch); err != nil {
		return 0, err
	}
	r.written, r.writtenRV, r.reported = patch, node.ResourceVersion, now
	level := klog.Level(4) // a plain renewal
	if len(patch) > 1 {
		level = 2
	}
	klog.V(level).InfoS("Updated the node's Ascend registration", "node", r.opts.Node, "chip", r.opts.Inventory.Entry().CommonWord,
		"keys", len(patch), "previousHandshake", hs)
	return r.opts.HandshakeInterval, nil
}
