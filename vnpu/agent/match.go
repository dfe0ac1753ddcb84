package agent

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// candidate is a pod whose next unserved container matches the request.
type candidate struct {
	pod *v1.Pod
	// entries is devices-to-allocate as this agent last knows it and idx
	// the container entry being served.
	entries [][]ascendproto.CardAssignment
	idx     int
	ctr     *v1.Container
	// runtime is huawei.com/<commonWord> by card UUID.
	runtime  map[string]ascendproto.RuntimeEntry
	bindTime int64
}

// errSkip marks a pod that is not refused but not for this request.
var errSkip = errors.New("not for this request")

// choose finds the pod the kubelet allocates for: the oldest (by
// hami.io/bind-time) allocating pod bound to the node whose next unserved
// container has n cards, among the pods in allow when it is not nil (those
// pending when the request came, see allocation.Arrivals). Pods whose
// annotations are refused are marked failed on the way (except pods bound
// elsewhere, which are not this agent's to touch); refused reports whether
// any pod was refused.
func (a *Allocator) choose(ctx context.Context, n int, now time.Time, allow map[types.UID]bool) (*candidate, bool, error) {
	a.tracker.Expire(now)
	pods, err := a.opts.Lookup.Pending()
	if err != nil {
		return nil, false, fmt.Errorf("find pending pods: %w", err)
	}
	// Only pending pods the request may not be served are left out: the
	// others cannot be served anyway, and match says why (being deleted,
	// not allocating), which the error names when nothing matches.
	pods = slices.DeleteFunc(pods, func(p *v1.Pod) bool { return a.protocol.Pending(p) && !allocation.Admits(allow, p) })
	var misses allocation.Misses
	best, ok := allocation.Best(pods, func(p *v1.Pod) (*candidate, error) { return a.match(p, n, now) }, (*candidate).before,
		func(pod *v1.Pod, err error) {
			switch {
			case errors.Is(err, ErrNotAllocating):
				misses.Inactive(err)
			case errors.Is(err, errSkip):
				misses.Skipped(err)
			case errors.Is(err, ErrNotBound): // bound elsewhere: not this agent's to fail
				misses.Refused(err)
			default:
				a.tracker.Fail(ctx, pod, err)
				misses.Refused(err)
			}
		})
	if ok {
		return best, false, nil
	}
	refused, err := misses.Err(fmt.Sprintf("node %s: no pending %s pod matches a request for %d devices",
		a.opts.Node, a.opts.Inventory.Entry().CommonWord, n), ErrNoPendingPod)
	return nil, refused, err
}

// before orders candidates: oldest bind-time, then namespace and name.
func (c *candidate) before(o *candidate) bool {
	return cmp.Or(cmp.Compare(c.bindTime, o.bindTime),
		cmp.Compare(c.pod.Namespace, o.pod.Namespace), cmp.Compare(c.pod.Name, o.pod.Name)) < 0
}

// match checks a pod against a request for n devices. errSkip: not for
// this request; any other error refuses the pod's allocation.
func (a *Allocator) match(pod *v1.Pod, n int, now time.Time) (*candidate, error) {
	ref := klog.KObj(pod).String()
	toAllocate, phase := a.tracker.View(pod, now)
	if pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("pod %s: being deleted: %w", ref, errSkip)
	}
	if pod.Spec.NodeName != a.opts.Node {
		return nil, fmt.Errorf("pod %s: bound to node %q, not %s: %w", ref, pod.Spec.NodeName, a.opts.Node, ErrNotBound)
	}
	if phase != ascendproto.BindPhaseAllocating {
		return nil, fmt.Errorf("pod %s: %s=%q, want %s: %w", ref, ascendproto.AnnotationBindPhase, phase, ascendproto.BindPhaseAllocating, ErrNotAllocating)
	}
	if node := pod.Annotations[ascendproto.AnnotationAssignedNode]; node != a.opts.Node {
		return nil, fmt.Errorf("pod %s: %s=%q was not written for node %s: %w", ref, ascendproto.AnnotationAssignedNode, node, a.opts.Node, ErrForged)
	}
	bindTime, err := allocation.BindTime(pod, ascendproto.AnnotationBindTime, now, a.opts.StaleAfter)
	if err != nil {
		return nil, err
	}
	entries, err := ascendproto.DecodeAssignments(toAllocate)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s: %v: %w", ref, a.keys.ToAllocate, err, ErrForged)
	}
	idx := ascendproto.NextPending(entries)
	if idx < 0 {
		return nil, fmt.Errorf("pod %s: no container left to serve in %s: %w", ref, a.keys.ToAllocate, errSkip)
	}
	if len(entries[idx]) != n {
		return nil, fmt.Errorf("pod %s: next container has %d cards, the kubelet asks for %d: %w", ref, len(entries[idx]), n, errSkip)
	}
	ctr, err := containerFor(pod, len(entries), idx)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %v: %w", ref, err, ErrForged)
	}
	c := &candidate{pod: pod, entries: entries, idx: idx, ctr: ctr, bindTime: bindTime}
	if err := a.check(c); err != nil {
		return nil, fmt.Errorf("pod %s container %s: %w", ref, ctr.Name, err)
	}
	return c, nil
}

// containerFor maps container entry idx of nparts to its container: by
// position when there is one entry per container (this project's
// scheduler), after the init containers when there is one per init and
// regular container (HAMi's order).
func containerFor(pod *v1.Pod, nparts, idx int) (*v1.Container, error) {
	inits, ctrs := pod.Spec.InitContainers, pod.Spec.Containers
	switch {
	case nparts == len(ctrs):
		return &ctrs[idx], nil
	case nparts == len(inits)+len(ctrs) && idx < len(inits):
		return &inits[idx], nil
	case nparts == len(inits)+len(ctrs):
		return &ctrs[idx-len(inits)], nil
	}
	return nil, fmt.Errorf("%d container entries for %d init and %d regular containers", nparts, len(inits), len(ctrs))
}

// check validates the candidate's cards against the node, the container's
// request and the runtime info.
func (a *Allocator) check(c *candidate) error {
	inv := a.opts.Inventory
	cw := inv.Entry().CommonWord
	entry := c.entries[c.idx]
	seen := make(map[string]bool, len(entry))
	for _, card := range entry {
		chip, ok := inv.Chip(card.UUID)
		switch {
		case card.Type != cw:
			return fmt.Errorf("card %s: type %q, this agent serves %s: %w", card.UUID, card.Type, cw, ErrForged)
		case !ok:
			return fmt.Errorf("chip %s: node %s has no such %s chip: %w", card.UUID, a.opts.Node, cw, ErrForged)
		case seen[card.UUID]:
			return fmt.Errorf("chip %s listed twice: %w", card.UUID, ErrForged)
		case card.MemMiB > chip.MemoryMiB:
			return fmt.Errorf("chip %s: %d MiB allocated, the chip has %d MiB: %w", card.UUID, card.MemMiB, chip.MemoryMiB, ErrForged)
		case card.Cores > hamiCorePercent:
			return fmt.Errorf("chip %s: cores %d%%: want at most %d: %w", card.UUID, card.Cores, hamiCorePercent, ErrForged)
		case !chip.Healthy:
			return fmt.Errorf("chip %s: %w", card.UUID, ErrUnhealthy)
		}
		seen[card.UUID] = true
	}
	res := v1.ResourceName(inv.Entry().ResourceName)
	if count, ok := limit(c.ctr, res); !ok || count != int64(len(entry)) {
		return fmt.Errorf("asks for %d of %s, the allocation has %d chips: %w", count, res, len(entry), ErrForged)
	}
	return a.checkRuntime(c)
}

// checkRuntime reads huawei.com/<commonWord> and requires an entry per
// card of the container, naming a template of the chip type when it names
// one.
func (a *Allocator) checkRuntime(c *candidate) error {
	key := a.keys.RuntimeInfo
	value, ok := c.pod.Annotations[key]
	if !ok {
		return fmt.Errorf("annotation %s missing: %w", key, ErrForged)
	}
	list, err := ascendproto.DecodeRuntimeInfo(value)
	if err != nil {
		return fmt.Errorf("annotation %s=%q: %v: %w", key, value, err, ErrForged)
	}
	c.runtime = make(map[string]ascendproto.RuntimeEntry, len(list))
	for _, r := range list {
		c.runtime[r.UUID] = r
	}
	for _, card := range c.entries[c.idx] {
		r, ok := c.runtime[card.UUID]
		if !ok {
			return fmt.Errorf("annotation %s has no entry for chip %s: %w", key, card.UUID, ErrForged)
		}
		if r.Temp != "" && !a.knownTemplate(r.Temp) {
			return fmt.Errorf("annotation %s: chip %s: template %q is not one of %s's: %w", key, card.UUID, r.Temp,
				a.opts.Inventory.Entry().CommonWord, ErrForged)
		}
	}
	return nil
}

func (a *Allocator) knownTemplate(name string) bool {
	for _, t := range a.opts.Inventory.Entry().Templates {
		if t.Name == name {
			return true
		}
	}
	return false
}

// limit reads a container's extended resource (limits, then requests).
func limit(ctr *v1.Container, name v1.ResourceName) (int64, bool) {
	q, ok := ctr.Resources.Limits[name]
	if !ok {
		q, ok = ctr.Resources.Requests[name]
	}
	if !ok {
		return 0, false
	}
	v, ok := q.AsInt64()
	if !ok {
		return math.MaxInt64, true
	}
	return v, true
}
