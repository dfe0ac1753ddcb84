package registrar

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/internal/nodeannot"
	"github.com/vgpushare/vshare/internal/notify"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Handshake timing. The values are protocol/vgpuproto's "Reported_<time>", which
// HAMi's Ascend handshake (protocol/ascendproto) shares.
const (
	// DefaultHandshakeInterval keeps reports well inside the schedulers'
	// 60 s; it is also how often HAMi's Ascend plugin renews its report.
	DefaultHandshakeInterval = 30 * time.Second
	// MaxHandshakeInterval is the schedulers' deadline for a report.
	MaxHandshakeInterval = 60 * time.Second
	maxRetryDelay        = 30 * time.Second
)

// Handshake is when a Registrar writes the handshake (see the package
// documentation).
type Handshake int

// Handshake policies.
const (
	// Answer reports with a registration change, and answers a
	// scheduler's value no sooner than the interval after the last report.
	Answer Handshake = iota
	// Renew reports every interval, and at once with a registration change
	// or a scheduler's value.
	Renew
)

// NodePatcher merges annotations into a node's.
type NodePatcher interface {
	PatchNodeAnnotations(ctx context.Context, node string, annotations map[string]string) error
}

// Options configure a Registrar.
type Options struct {
	// Node is this node's name. Required.
	Node string
	// What names the registration in logs, like "vGPU" or "Ascend".
	What string
	// Desired returns the registration annotations as they should be.
	// Required.
	Desired func() map[string]string
	// Changed returns a channel closed when Desired may have changed; it
	// is called before Desired. nil means Desired never changes.
	Changed func() <-chan struct{}
	// HandshakeKey is the handshake annotation. Required.
	HandshakeKey string
	// Handshake is the handshake policy.
	Handshake Handshake
	// Patcher writes the node. Required.
	Patcher NodePatcher
	// HandshakeInterval is the handshake interval (see Handshake); 0 means
	// DefaultHandshakeInterval. Must be below MaxHandshakeInterval.
	HandshakeInterval time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.Clock
	// LogValues are key-value pairs added to the log line of each update.
	LogValues []any
}

// Registrar keeps the node's registration current. Create it with New, feed
// it the node with ObserveNode (or Follow) and call Run once.
type Registrar struct {
	opts Options

	// mu guards node, written by the informer's handler.
	mu   sync.Mutex
	node *v1.Node
	// observed is signalled by ObserveNode.
	observed notify.Signal
	// The fields below belong to the goroutine running Run.
	//
	// written and writtenRV are what the last patch wrote and the node's
	// resourceVersion before it: while the observed node still has that
	// version, the informer has not shown the patch yet.
	written   map[string]string
	writtenRV string
	reported  time.Time
}

// New validates the options and returns a Registrar.
func New(opts Options) (*Registrar, error) {
	if opts.Node == "" || opts.Desired == nil || opts.HandshakeKey == "" || opts.Patcher == nil {
		return nil, errors.New("registrar: Node, Desired, HandshakeKey and Patcher are required")
	}
	if opts.HandshakeInterval == 0 {
		opts.HandshakeInterval = DefaultHandshakeInterval
	}
	if opts.HandshakeInterval < 0 || opts.HandshakeInterval >= MaxHandshakeInterval {
		return nil, errors.New("registrar: HandshakeInterval must be in (0, 60s)")
	}
	if opts.Changed == nil {
		never := make(chan struct{})
		opts.Changed = func() <-chan struct{} { return never }
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
	r.observed.Broadcast()
}

// Observed returns the node as last observed, nil before the first.
func (r *Registrar) Observed() *v1.Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.node
}

// Follow feeds the registrar every version of the node inf (a node
// informer) sees.
func (r *Registrar) Follow(inf cache.SharedIndexInformer) error {
	observe := func(obj any) {
		if n, ok := obj.(*v1.Node); ok {
			r.ObserveNode(n)
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) },
	}); err != nil {
		return fmt.Errorf("watch node %s: %w", r.opts.Node, err)
	}
	return nil
}

// Run keeps the registration current until ctx ends. It writes nothing
// before the node was observed.
func (r *Registrar) Run(ctx context.Context) {
	delay := time.Second
	for {
		changed, observed := r.opts.Changed(), r.observed.C()
		wait, err := r.Sync(ctx)
		if err != nil {
			klog.ErrorS(err, "Cannot update the node's "+r.opts.What+" registration; retrying", "node", r.opts.Node, "delay", delay)
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

// Sync writes what differs from the observed node once, and returns how
// long until the handshake is due (0: nothing due, wait for a change).
func (r *Registrar) Sync(ctx context.Context) (time.Duration, error) {
	node := r.Observed()
	if node == nil {
		return 0, nil
	}
	patch, current := nodeannot.Diff(node, r.writtenRV, r.written, r.opts.Desired())
	now := r.opts.Clock.Now()
	hs := current[r.opts.HandshakeKey]
	wait := r.handshake(patch, hs, now)
	if len(patch) == 0 {
		return wait, nil
	}
	if err := r.opts.Patcher.PatchNodeAnnotations(ctx, r.opts.Node, patch); err != nil {
		return 0, err
	}
	r.written, r.writtenRV = patch, node.ResourceVersion
	if _, ok := patch[r.opts.HandshakeKey]; ok {
		r.reported = now
	}
	level := klog.Level(2)
	if r.opts.Handshake == Renew && len(patch) == 1 {
		level = 4 // a plain renewal
	}
	klog.V(level).InfoS("Updated the node's "+r.opts.What+" registration",
		slices.Concat([]any{"node", r.opts.Node}, r.opts.LogValues, []any{"keys", len(patch), "previousHandshake", hs})...)
	return wait, nil
}

// handshake adds the handshake to patch when the policy says it is due,
// and returns how long until it is due otherwise. hs is the node's value.
func (r *Registrar) handshake(patch map[string]string, hs string, now time.Time) time.Duration {
	due := r.reported.Add(r.opts.HandshakeInterval)
	reported := strings.HasPrefix(hs, vgpuproto.HandshakeReported)
	write := len(patch) > 0 || r.reported.IsZero() || !now.Before(due)
	var wait time.Duration
	switch r.opts.Handshake {
	case Renew:
		write = write || !reported
		wait = r.opts.HandshakeInterval
		if !write {
			wait = due.Sub(now)
		}
	default: // Answer: only with a change, or when a scheduler asks
		write = len(patch) > 0 || (!reported && write)
		if !reported && !write {
			wait = due.Sub(now)
		}
	}
	if write {
		patch[r.opts.HandshakeKey] = vgpuproto.HandshakeReported + now.Format(vgpuproto.HandshakeLayout)
	}
	return wait
}
