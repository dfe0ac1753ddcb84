package gpushare

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// request returns the pod's request of the mode's resource, refusing pods
// that ask for both modes (ValidateRequest refuses them too; checking here
// keeps FilterNode and Allocate in agreement for callers that skip it).
func (d *Devices) request(pod *v1.Pod) (int64, error) { return d.backend.request(pod) }

func (b *Backend) request(pod *v1.Pod) (int64, error) {
	req, err := podRequest(pod, b.resource)
	if err != nil {
		return 0, fmt.Errorf("invalid GPU request: %w", err)
	}
	if req == 0 {
		return 0, nil
	}
	other := gpushareproto.ResourceGPUNumber
	if b.mode == ModeNumber {
		other = gpushareproto.ResourceGPUMemory
	}
	if asksFor(pod, other) {
		return 0, validateRequest(pod, b.resource)
	}
	return req, nil
}

// ResultKey implements device.ResultKeyer: FilterNode and ScoreNode read
// the pod only through its request of the mode's resource, and ScoreNode
// the policy. Pods without a valid request have no key.
func (b *Backend) ResultKey(pod *v1.Pod, policy string) (string, bool) {
	req, err := b.request(pod)
	if err != nil || req == 0 {
		return "", false
	}
	return strconv.FormatInt(req, 10) + "/" + policy, true
}

// ResultEpoch implements device.ResultKeyer: nothing but the request and
// the node's cards decides a result.
func (b *Backend) ResultEpoch() uint64 { return 0 }

// FilterNode reports whether the pod fits the node's cards. Share mode: a
// healthy card whose free memory covers the request, otherwise one reason
// per rejected card kind (unhealthy, too small, held whole, insufficient
// memory). Number mode: enough idle healthy cards, otherwise
// ReasonTooFewHealthyCards (unresolvable) or ReasonNotEnoughIdleCards.
// The policy does not change whether a pod fits. Pods without a request
// fit; invalid requests give an Error status.
func (d *Devices) FilterNode(pod *v1.Pod, policy string) *device.Status {
	req, err := d.request(pod)
	if err != nil {
		return device.NewStatus(device.Error, err.Error())
	}
	if req == 0 {
		return nil
	}
	st := d.fit(req)
	if st != nil {
		if v := klog.V(5); v.Enabled() {
			v.InfoS("GPU filter rejected node", "pod", klog.KObj(pod), "node", d.node,
				"device", d.backend.name, "request", req, "reasons", st.Message())
		}
	}
	return st
}

// fit is FilterNode for a positive request.
func (d *Devices) fit(req int64) *device.Status {
	if d.backend.mode == ModeShare {
		return d.filterShare(req)
	}
	return d.filterNumber(req)
}

func (d *Devices) filterShare(req int64) *device.Status {
	for i := range d.cards {
		if d.cards[i].fitsShare(req) {
			return nil
		}
	}
	var reasons device.CardReasons
	for i := range d.cards {
		c := &d.cards[i]
		switch {
		case !c.healthy:
			reasons.Add(ReasonCardUnhealthy, false)
		case c.total < req:
			reasons.Add(ReasonCardTooSmall, false)
		case c.numberPods > 0:
			reasons.Add(ReasonCardHeldWhole, true)
		default:
			reasons.Add(ReasonInsufficientMemory, true)
		}
	}
	return reasons.Status()
}

func (d *Devices) filterNumber(req int64) *device.Status {
	var healthy, idle int64
	for i := range d.cards {
		c := &d.cards[i]
		if c.healthy {
			healthy++
		}
		if c.idle() {
			idle++
		}
	}
	switch {
	case idle >= req:
		return nil
	case healthy < req:
		return device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewHealthyCards)
	default:
		return device.NewStatus(device.Unschedulable, ReasonNotEnoughIdleCards)
	}
}

// ScoreNode scores the node in [0, device.MaxScore] from its utilisation u
// after placing the pod, over healthy cards only:
//
//   - share mode: u = (used memory + request) / total memory, where a card
//     held whole by a gpu-number pod counts as fully used;
//   - number mode: u = (busy cards + requested cards) / cards, where a card
//     is busy when any pod holds it.
//
// binpack (and an empty or unknown policy) scores MaxScore*u, spread
// MaxScore*(1-u); u is clamped to [0, 1]. Pods without a valid request
// score 0.
func (d *Devices) ScoreNode(pod *v1.Pod, policy string) float64 {
	req, err := d.request(pod)
	if err != nil || req == 0 {
		return 0
	}
	used, total := float64(req), 0.0
	for i := range d.cards {
		c := &d.cards[i]
		if !c.healthy {
			continue
		}
		switch {
		case d.backend.mode == ModeNumber:
			total++
			if !c.idle() {
				used++
			}
		case c.numberPods > 0:
			total += float64(c.total)
			used += float64(c.total)
		default:
			total += float64(c.total)
			used += float64(min(max(c.used, 0), c.total))
		}
	}
	if total <= 0 {
		return 0
	}
	u := min(used/total, 1)
	if policy == device.PolicySpread {
		return device.MaxScore * (1 - u)
	}
	return device.MaxScore * u
}

// pickShareCard returns the card a share pod asking for req goes to, or -1:
// under spread the card with the most free memory, otherwise (binpack) the
// one with the least free memory that still fits; ties go to the lowest
// index.
func (d *Devices) pickShareCard(req int64, policy string) int {
	spread := policy == device.PolicySpread
	best, bestFree := -1, int64(0)
	for i := range d.cards {
		c := &d.cards[i]
		if !c.fitsShare(req) {
			continue
		}
		free := c.free()
		if best < 0 || (spread && free > bestFree) || (!spread && free < bestFree) {
			best, bestFree = i, free
		}
	}
	return best
}

// pickNumberCards returns the req lowest-indexed idle healthy cards, or nil.
func (d *Devices) pickNumberCards(req int64) []int {
	if req > int64(len(d.cards)) {
		return nil
	}
	out := make([]int, 0, req)
	for i := range d.cards {
		if int64(len(out)) == req {
			break
		}
		if d.cards[i].idle() {
			out = append(out, i)
		}
	}
	if int64(len(out)) < req {
		return nil
	}
	return out
}

// noFitError explains why Allocate found no cards, with FilterNode's reasons.
func (d *Devices) noFitError(pod *v1.Pod, req int64) error {
	return fmt.Errorf("allocate %s for pod %s/%s (request %d) on node %s: %s",
		d.backend.name, pod.Namespace, pod.Name, req, d.node, d.fit(req).Message())
}
