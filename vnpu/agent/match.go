package agent

import (
	"context"
	"fmt"
	"math"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// candidate is the claim of a pod whose next unserved container matches
// the request, queued by hami.io/bind-time, with the runtime info its
// cards were checked against.
type candidate struct {
	allocation.Claim[ascendproto.CardAssignment, int64]
	// runtime is huawei.com/<commonWord> by card UUID.
	runtime map[string]ascendproto.RuntimeEntry
}

// before orders candidates: oldest bind-time, then namespace and name.
func (c *candidate) before(o *candidate) bool { return c.Before(&o.Claim) }

// choose finds the pod the kubelet allocates for: the oldest (by
// hami.io/bind-time) allocating pod bound to the node whose next unserved
// container has req.Devices cards, among the pods req admits (those
// pending when the request came, see allocation.Arrivals). Pods whose
// annotations are refused are marked failed on the way (except pods bound
// elsewhere, which are not this agent's to touch); the bool reports whether
// any pod was refused.
func (a *Allocator) choose(ctx context.Context, req allocation.Request) (*candidate, bool, error) {
	a.tracker.Expire(req.Now)
	pods, err := a.opts.Lookup.Pending()
	if err != nil {
		return nil, false, fmt.Errorf("find pending pods: %w", err)
	}
	choice := allocation.NewChoice(a.tracker, (*candidate).before)
	for _, pod := range pods {
		// Only pending pods the request may not be served are left out: the
		// others cannot be served anyway, and match says why (being deleted,
		// not allocating), which the error names when nothing matches.
		if a.protocol.Pending(pod) && !req.Admits(pod) {
			continue
		}
		c, err := a.match(pod, req)
		choice.Offer(ctx, pod, c, err)
	}
	if best, ok := choice.Chosen(); ok {
		return best, false, nil
	}
	refused, err := choice.Err(fmt.Sprintf("node %s: no pending %s pod matches a request for %d devices",
		a.opts.Node, a.opts.Inventory.Entry().CommonWord, req.Devices), ErrNoPendingPod)
	return nil, refused, err
}

// match reads a pod's claim for the request. allocation.ErrNotForRequest:
// not for this request; any other error refuses the pod's allocation.
func (a *Allocator) match(pod *v1.Pod, req allocation.Request) (*candidate, error) {
	ref := klog.KObj(pod).String()
	toAllocate, phase := a.tracker.View(pod, req.Now)
	if pod.DeletionTimestamp != nil {
		return nil, fmt.Errorf("pod %s: being deleted: %w", ref, allocation.ErrNotForRequest)
	}
	if pod.Spec.NodeName != a.opts.Node {
		return nil, fmt.Errorf("pod %s: bound to node %q, not %s: %w", ref, pod.Spec.NodeName, a.opts.Node, ErrNotBound)
	}
	if phase != ascendproto.BindPhaseAllocating {
		return nil, fmt.Errorf("pod %s: %s=%q, want %s: %w", ref, ascendproto.AnnotationBindPhase, phase, ascendproto.BindPhaseAllocating, ErrNotAllocating)
	}
	bindTime, err := a.claims.Check(pod, ref, req.Now)
	if err != nil {
		return nil, err
	}
	entries, err := ascendproto.DecodeAssignments(toAllocate)
	if err != nil {
		return nil, fmt.Errorf("pod %s: %s: %v: %w", ref, a.keys.ToAllocate, err, ErrForged)
	}
	idx := ascendproto.NextPending(entries)
	if idx < 0 {
		return nil, fmt.Errorf("pod %s: no container left to serve in %s: %w", ref, a.keys.ToAllocate, allocation.ErrNotForRequest)
	}
	if len(entries[idx]) != req.Devices {
		return nil, fmt.Errorf("pod %s: next container has %d cards, the kubelet asks for %d: %w", ref, len(entries[idx]), req.Devices,
			allocation.ErrNotForRequest)
	}
	// One entry per container (this project's scheduler), or per init and
	// regular container (HAMi's order).
	ctrs, ok := allocation.EntryContainers(pod, len(entries))
	if !ok {
		return nil, fmt.Errorf("pod %s: %d container entries for %d init and %d regular containers: %w", ref, len(entries),
			len(pod.Spec.InitContainers), len(pod.Spec.Containers), ErrForged)
	}
	c := &candidate{Claim: allocation.Claim[ascendproto.CardAssignment, int64]{Pod: pod, Entries: entries, Index: idx, Container: ctrs[idx],
		Queue: bindTime}}
	if err := a.check(c); err != nil {
		return nil, fmt.Errorf("pod %s container %s: %w", ref, ctrs[idx].Name, err)
	}
	return c, nil
}

// check validates the candidate's cards against the node, the container's
// request and the runtime info.
func (a *Allocator) check(c *candidate) error {
	inv := a.opts.Inventory
	cw := inv.Entry().CommonWord
	entry := c.Entry()
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
	if count, ok := limit(c.Container, res); !ok || count != int64(len(entry)) {
		return fmt.Errorf("asks for %d of %s, the allocation has %d chips: %w", count, res, len(entry), ErrForged)
	}
	return a.checkRuntime(c)
}

// checkRuntime reads huawei.com/<commonWord> and requires an entry per
// card of the container, naming a template of the chip type when it names
// one.
func (a *Allocator) checkRuntime(c *candidate) error {
	key := a.keys.RuntimeInfo
	value, ok := c.Pod.Annotations[key]
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
	for _, card := range c.Entry() {
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

// limit reads a container's extended resource (limits, then requests);
// a quantity too large for an int64 reads as math.MaxInt64.
func limit(ctr *v1.Container, name v1.ResourceName) (int64, bool) {
	q, ok := allocation.Limit(ctr, name)
	if !ok {
		return 0, false
	}
	v, ok := q.AsInt64()
	if !ok {
		return math.MaxInt64, true
	}
	return v, true
}
