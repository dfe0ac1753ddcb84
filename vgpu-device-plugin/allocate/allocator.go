package allocate

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/allocsig"
	"github.com/vgpushare/vshare/protocol/vgpu"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// DefaultStaleAfter is how old (by bind-time) an allocation may be when the
// kubelet asks for it: the node lock's lifetime.
const DefaultStaleAfter = 5 * time.Minute

// MIGApplier provides MIG instances (nvidia.MIG implements it).
type MIGApplier interface {
	Apply(card nvidia.Card, catalogue []config.AllowedMIGGeometries, group string, pos int, othersInUse bool) (string, error)
}

// Options configure an Allocator.
type Options struct {
	// Node is this node's name. Required.
	Node string
	// Inventory returns the node's current cards. Required.
	Inventory func() *nvidia.Inventory
	// Healthy reports a card's health; nil means every card is healthy.
	Healthy func(uuid string) bool
	// Lookup finds the node's vGPU pods. Required.
	Lookup PodLookup
	// Patcher writes annotations. Required.
	Patcher Patcher
	// MIG provides MIG instances; nil refuses MIG allocations.
	MIG MIGApplier
	// LibvgpuHostPath is libvgpu.so on the host. Required.
	LibvgpuHostPath string
	// CacheHostDir is the host directory holding containers/<pod UID>_<container>
	// and ld.so.preload (see WritePreload). Required.
	CacheHostDir string
	// PassDeviceSpecs adds /dev/nvidia* device specs to the responses.
	PassDeviceSpecs bool
	// StaleAfter refuses allocations older than this; 0 means DefaultStaleAfter.
	StaleAfter time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// NewID names shared-region files; nil means random UUIDs.
	NewID func() string
	// InformerWait is how long Allocate keeps looking for the pod when none
	// matches yet: the kubelet learns of a bound pod at about the same time
	// as this agent's informer, and may ask first. 0 answers at once.
	InformerWait time.Duration
	// LivePods, when set, lists the node's pods from the API server (not
	// the informer). Allocate calls it when a request comes and the
	// informer has no pending pod, and then waits only for the pods pending
	// there at that moment: the pod the kubelet asks for was bound before
	// the kubelet asked, while a pod bound later has its own Allocate
	// coming. nil waits for any pod.
	LivePods func(ctx context.Context) ([]*v1.Pod, error)
	// Keys returns the allocation keys in force (internal/allocsig) and the
	// error of their last reload, if it failed; with Keys set, only
	// allocations signed by one of them are served. nil serves unsigned
	// allocations (Volcano's own scheduler does not sign).
	Keys func() (*allocsig.Keyring, error)
	// SchedulerNames, when not empty, are the spec.schedulerName values
	// whose pods get devices.
	SchedulerNames []string
	// Events, when set, records a Warning event EventAllocationFailed on
	// every pod whose allocation fails, naming why: the kubelet's Allocate
	// does not say which pod it is for, so its error may reach another
	// pod's admission.
	Events record.EventRecorder
}

// EventAllocationFailed is the reason of the Warning event recorded on a pod
// whose allocation was refused or failed.
const EventAllocationFailed = "VGPUAllocationFailed"

// informerPoll is how often Allocate looks again while it waits for the
// informer.
const informerPoll = 25 * time.Millisecond

// Allocator serves Allocate. Create it with New; it is safe for concurrent
// use (Allocate calls are serialised, as the protocol needs).
type Allocator struct {
	opts Options

	mu sync.Mutex
	// written remembers annotations this agent wrote that the informer may
	// not reflect yet, by pod UID.
	written map[types.UID]written
	// warned remembers when an event was last recorded on a pod that
	// asks for vGPUs without an allocation (see unambiguous).
	warned map[types.UID]time.Time
}

// written is what the agent last wrote on a pod.
type written struct {
	toAllocate string
	phase      string
	at         time.Time
}

// New validates the options and returns an Allocator.
func New(opts Options) (*Allocator, error) {
	switch {
	case opts.Node == "":
		return nil, errors.New("allocator: Node is required")
	case opts.Inventory == nil || opts.Lookup == nil || opts.Patcher == nil:
		return nil, errors.New("allocator: Inventory, Lookup and Patcher are required")
	case opts.LibvgpuHostPath == "" || opts.CacheHostDir == "":
		return nil, errors.New("allocator: LibvgpuHostPath and CacheHostDir are required")
	}
	if opts.Healthy == nil {
		opts.Healthy = func(string) bool { return true }
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.NewID == nil {
		opts.NewID = func() string { return string(uuid.NewUUID()) }
	}
	return &Allocator{opts: opts, written: map[types.UID]written{}, warned: map[types.UID]time.Time{}}, nil
}

// Allocate serves the kubelet's request, one container request at a time.
// Errors are gRPC statuses (see the sentinel errors for the codes).
func (a *Allocator) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	arrived := a.pendingAtArrival(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	resp := &pluginapi.AllocateResponse{}
	for _, cr := range req.GetContainerRequests() {
		r, err := a.allocateOne(ctx, len(cr.GetDevicesIDs()), arrived)
		if err != nil {
			klog.ErrorS(err, "Refused vGPU allocation", "node", a.opts.Node, "devices", len(cr.GetDevicesIDs()))
			return nil, toStatus(err)
		}
		resp.ContainerResponses = append(resp.ContainerResponses, r)
	}
	return resp, nil
}

// pendingAtArrival returns the pods pending with this agent when a request
// comes in, before it waits for the requests ahead of it: the kubelet asks
// only for a pod already bound here, so that pod is among them. A pod bound
// later has its own request coming; serving it to this request (one for a
// pod deleted meanwhile, say) would give this admission its cards, and that
// pod's own request the next pod's, and so on down the node's queue (found
// by the e2e fault campaign). The informer is read first; when it has none
// (it may lag the kubelet's), the API server (LivePods). An empty result
// means nothing was pending; nil, that this cannot be known (no LivePods,
// or the list failed), and any pending pod may serve the request.
func (a *Allocator) pendingAtArrival(ctx context.Context) map[types.UID]bool {
	out := map[types.UID]bool{}
	if pods, err := a.opts.Lookup.Allocating(); err == nil {
		for _, p := range pods {
			if p.DeletionTimestamp == nil && !terminal(p) {
				out[p.UID] = true
			}
		}
	}
	if len(out) > 0 {
		return out
	}
	if a.opts.LivePods == nil {
		return nil
	}
	pods, err := a.opts.LivePods(ctx)
	if err != nil {
		klog.ErrorS(err, "Cannot list the node's pods; any pending pod may serve the request", "node", a.opts.Node)
		return nil
	}
	for _, p := range pods {
		if p.Annotations[vgpu.AnnotationBindPhase] == vgpu.BindPhaseAllocating && p.DeletionTimestamp == nil && !terminal(p) {
			out[p.UID] = true
		}
	}
	return out
}

// chooseWaiting is choose among the pods in allow (any pod when allow is
// nil), looking again for up to InformerWait while none matches and none
// was refused: a pod the API server had pending may not have reached the
// informer yet. With nothing pending at all it answers at once. The wait is
// measured in real time (the kubelet's deadline is), whatever clock stamps
// the allocation.
func (a *Allocator) chooseWaiting(ctx context.Context, inv *nvidia.Inventory, n int, allow map[types.UID]bool) (*candidate, error) {
	start := time.Now()
	for {
		c, refused, err := a.choose(ctx, inv, n, a.opts.Clock.Now(), allow)
		if err == nil || refused || (allow != nil && len(allow) == 0) || time.Since(start) >= a.opts.InformerWait {
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

// allocateOne serves one container request for n virtual devices.
func (a *Allocator) allocateOne(ctx context.Context, n int, allow map[types.UID]bool) (*pluginapi.ContainerAllocateResponse, error) {
	inv := a.opts.Inventory()
	c, err := a.chooseWaiting(ctx, inv, n, allow)
	if err != nil {
		return nil, err
	}
	uses, err := a.check(c, inv)
	if err != nil {
		a.fail(ctx, c.pod, err)
		return nil, err
	}
	resp, err := a.respond(c, inv, uses)
	if err != nil {
		a.fail(ctx, c.pod, err)
		return nil, err
	}
	consumed := vgpu.Consume(c.entries, c.idx)
	patch := map[string]string{vgpu.AnnotationToAllocate: consumed}
	done := nextPendingOf(consumed) < 0
	if done {
		patch[vgpu.AnnotationBindPhase] = vgpu.BindPhaseSuccess
	}
	if err := a.opts.Patcher.PatchPodAnnotations(ctx, c.pod, patch); err != nil {
		err = fmt.Errorf("pod %s: record the allocation of container %s: %w", klog.KObj(c.pod), c.ctr.Name, err)
		a.fail(ctx, c.pod, err)
		return nil, err
	}
	w := written{toAllocate: consumed, phase: vgpu.BindPhaseAllocating, at: a.opts.Clock.Now()}
	if done {
		w.phase = vgpu.BindPhaseSuccess
		a.releaseLock(ctx, c.pod)
	}
	a.written[c.pod.UID] = w
	klog.V(2).InfoS("Allocated vGPUs", "pod", klog.KObj(c.pod), "container", c.ctr.Name,
		"devices", resp.Envs[EnvVisibleDevices], "podDone", done)
	return resp, nil
}

// nextPendingOf reports the next pending entry of an annotation value we
// wrote ourselves (it always decodes).
func nextPendingOf(value string) int {
	entries, err := vgpu.DecodeAllocation(value)
	if err != nil {
		return -1
	}
	return vgpu.NextPending(entries)
}

// fail sets the pod's bind-phase to failed and releases the node lock if the
// allocation was written for this node.
func (a *Allocator) fail(ctx context.Context, pod *v1.Pod, cause error) {
	klog.ErrorS(cause, "vGPU allocation failed", "pod", klog.KObj(pod))
	if a.opts.Events != nil {
		a.opts.Events.Eventf(pod, v1.EventTypeWarning, EventAllocationFailed, "node %s gives no devices: %v", a.opts.Node, cause)
	}
	if err := a.opts.Patcher.PatchPodAnnotations(ctx, pod, map[string]string{vgpu.AnnotationBindPhase: vgpu.BindPhaseFailed}); err != nil {
		klog.ErrorS(err, "Cannot mark the pod's allocation failed", "pod", klog.KObj(pod))
	}
	w := a.written[pod.UID]
	w.toAllocate, w.phase, w.at = pod.Annotations[vgpu.AnnotationToAllocate], vgpu.BindPhaseFailed, a.opts.Clock.Now()
	a.written[pod.UID] = w
	if pod.Annotations[vgpu.AnnotationNode] == a.opts.Node {
		a.releaseLock(ctx, pod)
	}
}

func (a *Allocator) releaseLock(ctx context.Context, pod *v1.Pod) {
	if err := a.opts.Patcher.ReleaseNodeLock(ctx, pod); err != nil {
		klog.ErrorS(err, "Cannot release the node lock", "node", a.opts.Node, "pod", klog.KObj(pod))
	}
}

// view returns the pod's devices-to-allocate and bind-phase, with this
// agent's writes the informer has not reflected yet applied.
func (a *Allocator) view(pod *v1.Pod, now time.Time) (toAllocate, phase string) {
	toAllocate, phase = pod.Annotations[vgpu.AnnotationToAllocate], pod.Annotations[vgpu.AnnotationBindPhase]
	w, ok := a.written[pod.UID]
	if !ok {
		return toAllocate, phase
	}
	if (toAllocate == w.toAllocate && phase == w.phase) || now.Sub(w.at) > a.opts.StaleAfter {
		delete(a.written, pod.UID) // the informer caught up (or the entry is too old to matter)
		return toAllocate, phase
	}
	return w.toAllocate, w.phase
}
