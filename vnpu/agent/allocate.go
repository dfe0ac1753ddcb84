package agent

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/protocol/ascend"
)

// Defaults of AllocatorOptions.
const (
	// DefaultStaleAfter is how old (by hami.io/bind-time) an allocation may
	// be when the kubelet asks for it: the node lock's lifetime.
	DefaultStaleAfter = 5 * time.Minute
	// DefaultHookDir is where HAMi's plugin keeps hami-vnpu-core on the host.
	DefaultHookDir = "/usr/local/hami-vnpu-core"
	// informerPoll is how often Allocate looks again while it waits for the
	// informer.
	informerPoll = 25 * time.Millisecond
)

// AllocatorOptions configure an Allocator.
type AllocatorOptions struct {
	// Node is this node's name. Required.
	Node string
	// Inventory is the node's chips. Required.
	Inventory *Inventory
	// Lookup finds the node's pending pods. Required.
	Lookup PodLookup
	// Patcher writes annotations. Required.
	Patcher Patcher
	// HookDir is hami-vnpu-core's host directory, the source of the
	// hami-core mounts; empty means DefaultHookDir. The simulated agent
	// only names it in the responses.
	HookDir string
	// StaleAfter refuses allocations older than this; 0 means
	// DefaultStaleAfter.
	StaleAfter time.Duration
	// InformerWait is how long Allocate keeps looking when no pod matches
	// yet (the kubelet may ask before the informer shows the pod).
	InformerWait time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
}

// Allocator serves the kubelet's Allocate calls. It is safe for concurrent
// use; calls are serialised, as the protocol needs.
type Allocator struct {
	opts AllocatorOptions
	keys ascend.Keys

	mu sync.Mutex
	// written remembers what this agent wrote on pods that the informer may
	// not show yet, by pod UID.
	written map[types.UID]written
}

// written is what the agent last wrote on a pod.
type written struct {
	toAllocate, phase string
	at                time.Time
}

// NewAllocator validates the options and returns an Allocator.
func NewAllocator(opts AllocatorOptions) (*Allocator, error) {
	if opts.Node == "" || opts.Inventory == nil || opts.Lookup == nil || opts.Patcher == nil {
		return nil, errors.New("allocator: Node, Inventory, Lookup and Patcher are required")
	}
	if opts.HookDir == "" {
		opts.HookDir = DefaultHookDir
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Allocator{opts: opts, keys: ascend.KeysFor(opts.Inventory.Entry().CommonWord), written: map[types.UID]written{}}, nil
}

// Allocate implements the device plugin's Allocate, one container request
// at a time. Errors are gRPC statuses (see the sentinel errors).
func (a *Allocator) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		r, err := a.allocateOne(ctx, cr.GetDevicesIDs())
		if err != nil {
			klog.ErrorS(err, "Refused Ascend allocation", "node", a.opts.Node, "devices", cr.GetDevicesIDs())
			return nil, toStatus(err)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

// allocateOne serves one container's request.
func (a *Allocator) allocateOne(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
	for _, id := range ids {
		if _, ok := a.opts.Inventory.chipOfDevice(id); !ok {
			return nil, fmt.Errorf("node %s: device %q was not advertised for %s: %w",
				a.opts.Node, id, a.opts.Inventory.Entry().ResourceName, ErrUnknownDevice)
		}
	}
	c, err := a.chooseWaiting(ctx, len(ids))
	if err != nil {
		return nil, err
	}
	resp := a.respond(c)
	c.entries[c.idx] = nil
	consumed := ascend.EncodeAssignments(c.entries)
	patch := map[string]string{a.keys.ToAllocate: consumed}
	done := ascend.NextPending(c.entries) < 0
	if done {
		patch[ascend.AnnotationBindPhase] = ascend.BindPhaseSuccess
	}
	if err := a.opts.Patcher.PatchPodAnnotations(ctx, c.pod, patch); err != nil {
		err = fmt.Errorf("pod %s: record the allocation of container %s: %w", klog.KObj(c.pod), c.ctr.Name, err)
		a.fail(ctx, c.pod, err)
		return nil, err
	}
	w := written{toAllocate: consumed, phase: ascend.BindPhaseAllocating, at: a.opts.Clock.Now()}
	if done {
		w.phase = ascend.BindPhaseSuccess
		a.releaseLock(ctx, c.pod)
	}
	a.written[c.pod.UID] = w
	klog.V(2).InfoS("Allocated Ascend chips", "pod", klog.KObj(c.pod), "container", c.ctr.Name,
		"chips", resp.Envs[ascend.EnvVisibleDevices], "podDone", done)
	return resp, nil
}

// chooseWaiting is choose, looking again for up to InformerWait while no
// pod matches and none was refused. The wait is in real time: it is the
// kubelet's deadline that matters, whatever clock dates allocations.
func (a *Allocator) chooseWaiting(ctx context.Context, n int) (*candidate, error) {
	start := time.Now()
	for {
		c, refused, err := a.choose(ctx, n, a.opts.Clock.Now())
		if err == nil || refused || time.Since(start) >= a.opts.InformerWait {
			return c, err
		}
		t := time.NewTimer(informerPoll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}

// fail sets the pod's bind-phase to failed and, when the allocation names
// this node, releases the node lock (HAMi's PodAllocationFailed).
func (a *Allocator) fail(ctx context.Context, pod *v1.Pod, cause error) {
	klog.ErrorS(cause, "Ascend allocation failed", "pod", klog.KObj(pod), "node", a.opts.Node)
	if err := a.opts.Patcher.PatchPodAnnotations(ctx, pod, map[string]string{ascend.AnnotationBindPhase: ascend.BindPhaseFailed}); err != nil {
		klog.ErrorS(err, "Cannot mark the pod's allocation failed", "pod", klog.KObj(pod))
	}
	w := a.written[pod.UID]
	if w.toAllocate == "" {
		w.toAllocate = pod.Annotations[a.keys.ToAllocate]
	}
	w.phase, w.at = ascend.BindPhaseFailed, a.opts.Clock.Now()
	a.written[pod.UID] = w
	if pod.Annotations[ascend.AnnotationAssignedNode] == a.opts.Node {
		a.releaseLock(ctx, pod)
	}
}

func (a *Allocator) releaseLock(ctx context.Context, pod *v1.Pod) {
	if err := a.opts.Patcher.ReleaseNodeLock(ctx, pod); err != nil {
		klog.ErrorS(err, "Cannot release the node lock", "node", a.opts.Node, "lock", ascend.NodeLockName, "pod", klog.KObj(pod))
	}
}

// view returns the pod's devices-to-allocate and bind-phase, with this
// agent's writes the informer does not show yet applied.
func (a *Allocator) view(pod *v1.Pod, now time.Time) (toAllocate, phase string) {
	toAllocate, phase = pod.Annotations[a.keys.ToAllocate], pod.Annotations[ascend.AnnotationBindPhase]
	w, ok := a.written[pod.UID]
	if !ok {
		return toAllocate, phase
	}
	if (toAllocate == w.toAllocate && phase == w.phase) || now.Sub(w.at) > a.opts.StaleAfter {
		delete(a.written, pod.UID) // the informer caught up, or the entry is too old to matter
		return toAllocate, phase
	}
	return w.toAllocate, w.phase
}
