package allocate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// candidate is a pod whose next pending entry matches the request.
type candidate struct {
	pod *v1.Pod
	// entries is devices-to-allocate (as this agent last knows it) and idx
	// the entry being served; ids is vgpu-ids-new.
	entries [][]vgpuproto.Device
	ids     [][]vgpuproto.Device
	idx     int
	ctr     *v1.Container
	vtime   uint64
}

// errSkip marks a pod that is not refused but does not match this request.
var errSkip = errors.New("not for this request")

// choose finds the pod the kubelet is allocating for: the oldest (by
// vgpu-time) allocating pod whose next pending entry has n cards, among the
// pods in allow when it is not nil. Pods whose annotations are refused are
// marked failed on the way; refused reports whether any was.
func (a *Allocator) choose(ctx context.Context, inv *nvidia.Inventory, n int, now time.Time, allow map[types.UID]bool) (c *candidate, refused bool, err error) {
	a.tracker.Expire(now)
	for uid, at := range a.warned {
		if now.Sub(at) > a.opts.StaleAfter {
			delete(a.warned, uid)
		}
	}
	pods, err := a.opts.Lookup.Allocating()
	if err != nil {
		return nil, false, fmt.Errorf("find pending pods: %w", err)
	}
	// A pod not pending when the request came has its own request coming.
	pods = slices.DeleteFunc(pods, func(p *v1.Pod) bool { return allow != nil && !allow[p.UID] })
	var misses allocation.Misses
	best, ok := allocation.Best(pods, func(p *v1.Pod) (*candidate, error) { return a.match(p, inv, n, now) }, (*candidate).before,
		func(pod *v1.Pod, err error) {
			if errors.Is(err, errSkip) {
				misses.Skipped(err)
				return
			}
			a.tracker.Fail(ctx, pod, err)
			misses.Refused(err)
		})
	if ok {
		if err := a.unambiguous(best, inv, n, now); err != nil {
			return nil, true, err
		}
		return best, false, nil
	}
	refused, err = misses.Err(fmt.Sprintf("node %s: no pending vGPU pod matches a request for %d devices", a.opts.Node, n), ErrNoPendingPod)
	return nil, refused, err
}

// before orders candidates: oldest vgpu-time, then name.
func (c *candidate) before(o *candidate) bool {
	return cmp.Or(cmp.Compare(c.vtime, o.vtime),
		cmp.Compare(c.pod.Namespace, o.pod.Namespace), cmp.Compare(c.pod.Name, o.pod.Name)) < 0
}

// match checks a pod against the request. errSkip: not for this request; any
// other error refuses the pod's allocation.
func (a *Allocator) match(pod *v1.Pod, inv *nvidia.Inventory, n int, now time.Time) (*candidate, error) {
	ref := klog.KObj(pod).String()
	toAllocate, phase := a.tracker.View(pod, now)
	if pod.DeletionTimestamp != nil || phase != vgpuproto.BindPhaseAllocating {
		return nil, fmt.Errorf("pod %s: being deleted or no longer allocating: %w", ref, errSkip)
	}
	// A pod the kubelet failed (an admission error: another device
	// plugin, the node's resources) keeps bind-phase allocating; the
	// kubelet never asks for it again, and its cards are free again for
	// the scheduler. Serving its entry would give a live pod those cards.
	if allocation.Terminal(pod) {
		return nil, fmt.Errorf("pod %s: terminated (%s) before its allocation was served: %w", ref, pod.Status.Phase, errSkip)
	}
	if node := pod.Annotations[vgpuproto.AnnotationNode]; node != a.opts.Node {
		return nil, fmt.Errorf("pod %s: %s=%q was not written for node %s: %w", ref, vgpuproto.AnnotationNode, node, a.opts.Node, ErrForged)
	}
	if err := a.trust.Check(pod, a.opts.Node, ref); err != nil {
		return nil, err
	}
	if _, err := allocation.BindTime(pod, vgpuproto.AnnotationBindTime, now, a.opts.StaleAfter); err != nil {
		return nil, err
	}
	entries, err := vgpuproto.DecodeAllocation(toAllocate)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s: %v: %w", ref, vgpuproto.AnnotationToAllocate, err, ErrForged)
	}
	idx := vgpuproto.NextPending(entries)
	if idx < 0 {
		return nil, fmt.Errorf("pod %s: no pending entry in %s: %w", ref, vgpuproto.AnnotationToAllocate, errSkip)
	}
	if len(entries[idx]) != n {
		return nil, fmt.Errorf("pod %s: next entry has %d cards, the kubelet asks for %d: %w", ref, len(entries[idx]), n, errSkip)
	}
	ids, err := vgpuproto.DecodeAllocation(pod.Annotations[vgpuproto.AnnotationIDs])
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s: %v: %w", ref, vgpuproto.AnnotationIDs, err, ErrForged)
	}
	if len(ids) != len(entries) || !slices.Equal(ids[idx], entries[idx]) {
		return nil, fmt.Errorf("pod %s: %s entry %d differs from %s: %w", ref, vgpuproto.AnnotationToAllocate, idx, vgpuproto.AnnotationIDs, ErrForged)
	}
	ctr, err := containerFor(pod, ids, idx, inv)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %v: %w", ref, err, ErrForged)
	}
	return &candidate{pod: pod, entries: entries, ids: ids, idx: idx, ctr: ctr, vtime: vgpuTime(pod)}, nil
}

// vgpuTime reads volcano.sh/vgpu-time; pods without one are served last, as
// upstream does.
func vgpuTime(pod *v1.Pod) uint64 {
	t, err := strconv.ParseUint(pod.Annotations[vgpuproto.AnnotationTime], 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return t
}

// containerFor maps entry idx of the allocation ids (vgpu-ids-new, whose
// entries devices-to-allocate consumes) to its container, and checks that
// the kubelet's Allocate calls will follow the entries one for one. The
// kubelet admits a pod's init containers, then its regular containers, in
// spec order, and calls Allocate once for each container whose count
// resource is more than 0, for that many devices, reused or not
// (k8s.io/kubernetes pkg/kubelet/cm/devicemanager manager.go, Allocate
// and allocateContainerResources; topologymanager scope Admit). The
// request names devices, not a container, and the agent serves the next
// entry with cards: a container asking for cards without an entry of that
// many, or an entry for a container that does not ask, would shift every
// later container onto another container's cards. Such a pod is refused.
func containerFor(pod *v1.Pod, ids [][]vgpuproto.Device, idx int, inv *nvidia.Inventory) (*v1.Container, error) {
	res := inv.NVIDIA.ResourceCountName
	ctrs, err := entryContainers(pod, len(ids), inv)
	if err != nil {
		return nil, err
	}
	for j, c := range ctrs {
		if n, _ := limit(c, res); n != int64(len(ids[j])) {
			return nil, fmt.Errorf("%s %q asks for %d of %s, its entry %d of %s has %d cards: the kubelet calls Allocate "+
				"once per container asking for %s, in the order it admits them, so the entries would not follow its calls",
				kindOf(pod, c), c.Name, n, res, j, vgpuproto.AnnotationIDs, len(ids[j]), res)
		}
	}
	return ctrs[idx], nil
}

// entryContainers returns the container of each of n allocation entries:
// the init containers', then the regular containers' (vgpu.InitEntries);
// one per regular container; or, for fewer entries (Volcano v1.10 writes
// entries only for them), the regular containers asking for vGPUs in
// order. Without init entries no init container may ask for cards: the
// kubelet admits it first.
func entryContainers(pod *v1.Pod, n int, inv *nvidia.Inventory) ([]*v1.Container, error) {
	res := inv.NVIDIA.ResourceCountName
	out := make([]*v1.Container, 0, n)
	if vgpuproto.InitEntries(pod, n) > 0 {
		for i := range pod.Spec.InitContainers {
			out = append(out, &pod.Spec.InitContainers[i])
		}
	} else {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if v, _ := limit(c, res); v > 0 {
				return nil, fmt.Errorf("init container %q asks for %d of %s, but %s has no entries for init containers "+
					"(%d entries for %d containers): the kubelet admits it first and would be served another container's cards",
					c.Name, v, res, vgpuproto.AnnotationIDs, n, len(pod.Spec.Containers))
			}
		}
	}
	ctrs := pod.Spec.Containers
	fewer := len(out)+len(ctrs) > n // Volcano v1.10's form: only the asking containers
	for i := range ctrs {
		if !fewer || asksVGPU(&ctrs[i], inv) {
			out = append(out, &ctrs[i])
		}
	}
	if len(out) != n {
		return nil, fmt.Errorf("%s has %d entries for %d containers and %d init containers, %d of them asking for vGPUs",
			vgpuproto.AnnotationIDs, n, len(ctrs), len(pod.Spec.InitContainers), len(out))
	}
	return out, nil
}

// asksVGPU reports whether a container names the count or memory resource.
func asksVGPU(c *v1.Container, inv *nvidia.Inventory) bool {
	if _, ok := limit(c, inv.NVIDIA.ResourceCountName); ok {
		return true
	}
	_, ok := limit(c, inv.NVIDIA.ResourceMemoryName)
	return ok
}

// kindOf says "init container" or "container".
func kindOf(pod *v1.Pod, c *v1.Container) string {
	for i := range pod.Spec.InitContainers {
		if &pod.Spec.InitContainers[i] == c {
			return "init container"
		}
	}
	return "container"
}

// limit reads a container's extended resource (limits, then requests).
func limit(ctr *v1.Container, name string) (int64, bool) {
	q, ok := ctr.Resources.Limits[v1.ResourceName(name)]
	if !ok {
		q, ok = ctr.Resources.Requests[v1.ResourceName(name)]
	}
	if !ok {
		return 0, false
	}
	return q.Value(), true
}
