package allocate

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/protocol/vgpu"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// candidate is a pod whose next pending entry matches the request.
type candidate struct {
	pod *v1.Pod
	// entries is devices-to-allocate (as this agent last knows it) and idx
	// the entry being served; ids is vgpu-ids-new.
	entries [][]vgpu.Device
	ids     [][]vgpu.Device
	idx     int
	ctr     *v1.Container
	vtime   uint64
}

// errSkip marks a pod that is not refused but does not match this request.
var errSkip = errors.New("not for this request")

// maxReported bounds the skipped pods named in a "no pending pod" error.
const maxReported = 5

// choose finds the pod the kubelet is allocating for: the oldest (by
// vgpu-time) allocating pod whose next pending entry has n cards, among the
// pods in allow when it is not nil. Pods whose annotations are refused are
// marked failed on the way; refused reports whether any was.
func (a *Allocator) choose(ctx context.Context, inv *nvidia.Inventory, n int, now time.Time, allow map[types.UID]bool) (c *candidate, refused bool, err error) {
	for uid, w := range a.written {
		if now.Sub(w.at) > a.opts.StaleAfter {
			delete(a.written, uid)
		}
	}
	for uid, at := range a.warned {
		if now.Sub(at) > a.opts.StaleAfter {
			delete(a.warned, uid)
		}
	}
	pods, err := a.opts.Lookup.Allocating()
	if err != nil {
		return nil, false, fmt.Errorf("find pending pods: %w", err)
	}
	var best *candidate
	var skipped []string
	var refusal error
	for _, pod := range pods {
		if allow != nil && !allow[pod.UID] {
			continue // not pending when the request came: its own request follows
		}
		c, err := a.match(pod, inv, n, now)
		switch {
		case err == nil:
			if best == nil || c.before(best) {
				best = c
			}
			continue
		case !errors.Is(err, errSkip):
			a.fail(ctx, pod, err)
			if refusal == nil {
				refusal = err
			}
		}
		if len(skipped) < maxReported {
			skipped = append(skipped, err.Error())
		}
	}
	if best != nil {
		if err := a.unambiguous(best, inv, n, now); err != nil {
			return nil, true, err
		}
		return best, false, nil
	}
	msg := fmt.Sprintf("node %s: no pending vGPU pod matches a request for %d devices", a.opts.Node, n)
	if len(skipped) > 0 {
		msg += " (" + strings.Join(skipped, "; ") + ")"
	}
	// A refused pod was most likely the one the kubelet is admitting: its
	// refusal gives the error its class.
	if refusal != nil {
		return nil, true, fmt.Errorf("%s: %w", msg, errors.Join(ErrNoPendingPod, refusal))
	}
	return nil, false, fmt.Errorf("%s: %w", msg, ErrNoPendingPod)
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
	toAllocate, phase := a.view(pod, now)
	if pod.DeletionTimestamp != nil || phase != vgpu.BindPhaseAllocating {
		return nil, fmt.Errorf("pod %s: being deleted or no longer allocating: %w", ref, errSkip)
	}
	// A pod the kubelet failed (an admission error: another device
	// plugin, the node's resources) keeps bind-phase allocating; the
	// kubelet never asks for it again, and its cards are free again for
	// the scheduler. Serving its entry would give a live pod those cards.
	if terminal(pod) {
		return nil, fmt.Errorf("pod %s: terminated (%s) before its allocation was served: %w", ref, pod.Status.Phase, errSkip)
	}
	if node := pod.Annotations[vgpu.AnnotationNode]; node != a.opts.Node {
		return nil, fmt.Errorf("pod %s: %s=%q was not written for node %s: %w", ref, vgpu.AnnotationNode, node, a.opts.Node, ErrForged)
	}
	if err := a.trusted(pod, ref); err != nil {
		return nil, err
	}
	bindTime, err := strconv.ParseInt(pod.Annotations[vgpu.AnnotationBindTime], 10, 64)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s=%q: want Unix seconds: %w", ref, vgpu.AnnotationBindTime, pod.Annotations[vgpu.AnnotationBindTime], ErrForged)
	}
	if age := now.Sub(time.Unix(bindTime, 0)); age > a.opts.StaleAfter {
		return nil, fmt.Errorf("pod %s: %s=%d is %s old, more than %s: %w", ref, vgpu.AnnotationBindTime, bindTime,
			age.Truncate(time.Second), a.opts.StaleAfter, ErrStale)
	}
	entries, err := vgpu.DecodeAllocation(toAllocate)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s: %v: %w", ref, vgpu.AnnotationToAllocate, err, ErrForged)
	}
	idx := vgpu.NextPending(entries)
	if idx < 0 {
		return nil, fmt.Errorf("pod %s: no pending entry in %s: %w", ref, vgpu.AnnotationToAllocate, errSkip)
	}
	if len(entries[idx]) != n {
		return nil, fmt.Errorf("pod %s: next entry has %d cards, the kubelet asks for %d: %w", ref, len(entries[idx]), n, errSkip)
	}
	ids, err := vgpu.DecodeAllocation(pod.Annotations[vgpu.AnnotationIDs])
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s: %v: %w", ref, vgpu.AnnotationIDs, err, ErrForged)
	}
	if len(ids) != len(entries) || !slices.Equal(ids[idx], entries[idx]) {
		return nil, fmt.Errorf("pod %s: %s entry %d differs from %s: %w", ref, vgpu.AnnotationToAllocate, idx, vgpu.AnnotationIDs, ErrForged)
	}
	ctr, err := containerFor(pod, len(entries), idx, inv)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %v: %w", ref, err, ErrForged)
	}
	return &candidate{pod: pod, entries: entries, ids: ids, idx: idx, ctr: ctr, vtime: vgpuTime(pod)}, nil
}

// vgpuTime reads volcano.sh/vgpu-time; pods without one are served last, as
// upstream does.
func vgpuTime(pod *v1.Pod) uint64 {
	t, err := strconv.ParseUint(pod.Annotations[vgpu.AnnotationTime], 10, 64)
	if err != nil {
		return math.MaxUint64
	}
	return t
}

// containerFor maps entry idx of nparts to its container: by position when
// there is one entry per container (this project's scheduler), otherwise the
// idx-th container asking for vGPUs (Volcano v1.10 writes entries only for
// those).
func containerFor(pod *v1.Pod, nparts, idx int, inv *nvidia.Inventory) (*v1.Container, error) {
	ctrs := pod.Spec.Containers
	if nparts == len(ctrs) {
		return &ctrs[idx], nil
	}
	k := 0
	for i := range ctrs {
		if _, ok := limit(&ctrs[i], inv.NVIDIA.ResourceCountName); !ok {
			if _, ok := limit(&ctrs[i], inv.NVIDIA.ResourceMemoryName); !ok {
				continue
			}
		}
		if k == idx {
			return &ctrs[i], nil
		}
		k++
	}
	return nil, fmt.Errorf("%s has %d entries for %d containers, %d of them asking for vGPUs", vgpu.AnnotationToAllocate, nparts, len(ctrs), k)
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
