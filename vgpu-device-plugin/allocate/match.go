package allocate

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// candidate is the claim of a pod whose next pending entry matches the
// request, queued by volcano.sh/vgpu-time.
type candidate = allocation.Claim[vgpuproto.Device, uint64]

// choose finds the pod the kubelet is allocating for: the oldest (by
// vgpu-time) allocating pod whose next pending entry has req.Devices cards,
// among the pods req admits. Pods whose annotations are refused are marked
// failed on the way; the bool reports whether any was.
func (a *Allocator) choose(ctx context.Context, inv *nvidia.Inventory, req allocation.Request) (*candidate, bool, error) {
	a.tracker.Expire(req.Now)
	for uid, at := range a.warned {
		if req.Now.Sub(at) > a.opts.StaleAfter {
			delete(a.warned, uid)
		}
	}
	pods, err := a.opts.Lookup.Allocating()
	if err != nil {
		return nil, false, fmt.Errorf("find pending pods: %w", err)
	}
	choice := allocation.NewChoice(a.tracker, (*candidate).Before)
	for _, pod := range pods {
		// A pod not pending when the request came has its own request coming.
		if req.Admits(pod) {
			c, err := a.match(pod, inv, req)
			choice.Offer(ctx, pod, c, err)
		}
	}
	if best, ok := choice.Chosen(); ok {
		if err := a.unambiguous(best, inv, req.Devices, req.Now); err != nil {
			return nil, true, err
		}
		return best, false, nil
	}
	refused, err := choice.Err(fmt.Sprintf("node %s: no pending vGPU pod matches a request for %d devices", a.opts.Node, req.Devices), ErrNoPendingPod)
	return nil, refused, err
}

// match reads a pod's claim for the request. allocation.ErrNotForRequest:
// not for this request; any other error refuses the pod's allocation.
func (a *Allocator) match(pod *v1.Pod, inv *nvidia.Inventory, req allocation.Request) (*candidate, error) {
	ref := klog.KObj(pod).String()
	toAllocate, phase := a.tracker.View(pod, req.Now)
	if pod.DeletionTimestamp != nil || phase != vgpuproto.BindPhaseAllocating {
		return nil, fmt.Errorf("pod %s: being deleted or no longer allocating: %w", ref, allocation.ErrNotForRequest)
	}
	// A pod the kubelet failed (an admission error: another device
	// plugin, the node's resources) keeps bind-phase allocating; the
	// kubelet never asks for it again, and its cards are free again for
	// the scheduler. Serving its entry would give a live pod those cards.
	if allocation.Terminal(pod) {
		return nil, fmt.Errorf("pod %s: terminated (%s) before its allocation was served: %w", ref, pod.Status.Phase, allocation.ErrNotForRequest)
	}
	if _, err := a.claims.Check(pod, ref, req.Now); err != nil {
		return nil, err
	}
	entries, err := vgpuproto.DecodeAllocation(toAllocate)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s: %v: %w", ref, vgpuproto.AnnotationToAllocate, err, ErrForged)
	}
	idx := vgpuproto.NextPending(entries)
	if idx < 0 {
		return nil, fmt.Errorf("pod %s: no pending entry in %s: %w", ref, vgpuproto.AnnotationToAllocate, allocation.ErrNotForRequest)
	}
	if len(entries[idx]) != req.Devices {
		return nil, fmt.Errorf("pod %s: next entry has %d cards, the kubelet asks for %d: %w", ref, len(entries[idx]), req.Devices,
			allocation.ErrNotForRequest)
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
	return &candidate{Pod: pod, Entries: entries, Index: idx, Container: ctr, Queue: vgpuTime(pod)}, nil
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
// one per regular container, or the init containers' then the regular
// containers' (vgpu.InitEntries; allocation.EntryContainers); or, for
// fewer entries (Volcano v1.10 writes entries only for them), the regular
// containers asking for vGPUs in order. Without init entries no init
// container may ask for cards: the kubelet admits it first.
func entryContainers(pod *v1.Pod, n int, inv *nvidia.Inventory) ([]*v1.Container, error) {
	res := inv.NVIDIA.ResourceCountName
	if vgpuproto.InitEntries(pod, n) == 0 {
		for i := range pod.Spec.InitContainers {
			c := &pod.Spec.InitContainers[i]
			if v, _ := limit(c, res); v > 0 {
				return nil, fmt.Errorf("init container %q asks for %d of %s, but %s has no entries for init containers "+
					"(%d entries for %d containers): the kubelet admits it first and would be served another container's cards",
					c.Name, v, res, vgpuproto.AnnotationIDs, n, len(pod.Spec.Containers))
			}
		}
	}
	if out, ok := allocation.EntryContainers(pod, n); ok {
		return out, nil
	}
	// Fewer entries than containers: Volcano v1.10's layout, the
	// containers asking for vGPUs only. More: every container, refused
	// below.
	ctrs := pod.Spec.Containers
	out := make([]*v1.Container, 0, n)
	for i := range ctrs {
		if len(ctrs) < n || asksVGPU(&ctrs[i], inv) {
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
	q, ok := allocation.Limit(ctr, v1.ResourceName(name))
	return q.Value(), ok
}
