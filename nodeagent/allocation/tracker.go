package allocation

import (
	"context"
	"fmt"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// TrackerOptions configure a Tracker.
type TrackerOptions struct {
	// Node is this node's name.
	Node string
	// Protocol names the annotations written.
	Protocol Protocol
	// Patcher writes them.
	Patcher Patcher
	// Kind names the devices in logs, like "vGPU" or "Ascend".
	Kind string
	// StaleAfter is how long a write is remembered at most: the allocation
	// timeout.
	StaleAfter time.Duration
	// Clock dates the writes; nil means the real clock.
	Clock clock.PassiveClock
	// Events, when set, records a Warning event with reason EventReason on
	// every pod whose allocation fails, naming why: the kubelet's Allocate
	// does not say which pod it is for, so its error may reach another
	// pod's admission.
	Events      record.EventRecorder
	EventReason string
	// ReleaseLock, when set, says whether a served pod's node lock needs
	// releasing (see nodelock.AnnotationTaken); false skips the
	// Patcher's ReleaseNodeLock, which reads the node. nil releases
	// always. A failed allocation always releases: what it carries may be
	// what failed verification.
	ReleaseLock func(*v1.Pod) bool
}

// Tracker writes the outcome of a container's allocation on its pod and
// remembers what it wrote until the agent's informer shows it, so that a
// pod's next container never sees the entry the previous one consumed. It
// is not safe for concurrent use: an Allocator serialises its calls.
type Tracker struct {
	opts TrackerOptions
	// written is what this agent wrote on pods, by pod UID.
	written map[types.UID]written
}

// written is what the agent last wrote on a pod.
type written struct {
	toAllocate, phase string
	at                time.Time
}

// NewTracker returns a Tracker.
func NewTracker(opts TrackerOptions) *Tracker {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Tracker{opts: opts, written: map[types.UID]written{}}
}

// Expire forgets the writes older than StaleAfter.
func (t *Tracker) Expire(now time.Time) {
	for uid, w := range t.written {
		if now.Sub(w.at) > t.opts.StaleAfter {
			delete(t.written, uid)
		}
	}
}

// View returns the pod's devices-to-allocate and bind-phase, with this
// agent's writes the informer does not show yet applied.
func (t *Tracker) View(pod *v1.Pod, now time.Time) (toAllocate, phase string) {
	p := t.opts.Protocol
	toAllocate, phase = pod.Annotations[p.ToAllocate], pod.Annotations[p.BindPhase]
	w, ok := t.written[pod.UID]
	if !ok {
		return toAllocate, phase
	}
	if (toAllocate == w.toAllocate && phase == w.phase) || now.Sub(w.at) > t.opts.StaleAfter {
		delete(t.written, pod.UID) // the informer caught up, or the entry is too old to matter
		return toAllocate, phase
	}
	return w.toAllocate, w.phase
}

// Failed reports whether this agent marked the pod's allocation failed,
// which the informer may not show yet.
func (t *Tracker) Failed(uid types.UID) bool {
	w, ok := t.written[uid]
	return ok && w.phase == t.opts.Protocol.Failed
}

// Served records that container ctr of pod was served: devices-to-allocate
// becomes consumed and, when done (no container left), the bind-phase
// success and the node lock is released. When the write fails, the
// allocation fails and the error is returned.
func (t *Tracker) Served(ctx context.Context, pod *v1.Pod, ctr, consumed string, done bool) error {
	p := t.opts.Protocol
	patch := map[string]string{p.ToAllocate: consumed}
	if done {
		patch[p.BindPhase] = p.Success
	}
	if err := t.opts.Patcher.PatchPodAnnotations(ctx, pod, patch); err != nil {
		err = fmt.Errorf("pod %s: record the allocation of container %s: %w", klog.KObj(pod), ctr, err)
		t.Fail(ctx, pod, err)
		return err
	}
	w := written{toAllocate: consumed, phase: p.Allocating, at: t.opts.Clock.Now()}
	if done {
		w.phase = p.Success
		if t.opts.ReleaseLock == nil || t.opts.ReleaseLock(pod) {
			t.releaseLock(ctx, pod)
		}
	}
	t.written[pod.UID] = w
	return nil
}

// Fail sets the pod's bind-phase to failed and, when the allocation names
// this node, releases the node lock (HAMi's PodAllocationFailed).
func (t *Tracker) Fail(ctx context.Context, pod *v1.Pod, cause error) {
	p := t.opts.Protocol
	klog.ErrorS(cause, t.opts.Kind+" allocation failed", "pod", klog.KObj(pod), "node", t.opts.Node)
	if t.opts.Events != nil {
		t.opts.Events.Eventf(pod, v1.EventTypeWarning, t.opts.EventReason, "node %s gives no devices: %v", t.opts.Node, cause)
	}
	if err := t.opts.Patcher.PatchPodAnnotations(ctx, pod, map[string]string{p.BindPhase: p.Failed}); err != nil {
		klog.ErrorS(err, "Cannot mark the pod's allocation failed", "pod", klog.KObj(pod))
	}
	w := t.written[pod.UID]
	if w.toAllocate == "" {
		w.toAllocate = pod.Annotations[p.ToAllocate]
	}
	w.phase, w.at = p.Failed, t.opts.Clock.Now()
	t.written[pod.UID] = w
	if pod.Annotations[p.Node] == t.opts.Node {
		t.releaseLock(ctx, pod)
	}
}

func (t *Tracker) releaseLock(ctx context.Context, pod *v1.Pod) {
	if err := t.opts.Patcher.ReleaseNodeLock(ctx, pod); err != nil {
		klog.ErrorS(err, "Cannot release the node lock", "node", t.opts.Node, "pod", klog.KObj(pod))
	}
}
