package vgpu

import (
	"slices"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
)

// reason is why a card does not fit a container (cardfit.Reason), in the
// order check tries them.
type reason = cardfit.Reason

const (
	fits              = cardfit.Fits
	rUnhealthy reason = iota
	rCordoned
	rMode
	rType
	rUUID
	rTooSmall
	rNoMIG
	rGang
	rExclRule
	rShareCount
	rExclusive
	rCoresFull
	rCores
	rMIGBusy
	rMemory
)

// describe returns a reason's message and whether evicting pods could make
// the card fit.
func describe(r reason) (string, bool) {
	switch r {
	case rUnhealthy:
		return ReasonUnhealthy, false
	case rCordoned:
		return ReasonCordoned, false
	case rMode:
		return ReasonModeMismatch, false
	case rType:
		return ReasonTypeMismatch, false
	case rUUID:
		return ReasonUUIDExcluded, false
	case rTooSmall:
		return ReasonCardTooSmall, false
	case rNoMIG:
		return ReasonNoMIGInstance, false
	case rGang:
		return ReasonGangOnCard, false
	case rExclRule:
		return ReasonExclusiveRule, true
	case rShareCount:
		return ReasonShareCountFull, true
	case rExclusive:
		return ReasonExclusiveBusy, true
	case rCoresFull:
		return ReasonCardCoresFull, true
	case rCores:
		return ReasonInsufficientCore, true
	case rMIGBusy:
		return ReasonMIGBusy, true
	default:
		return ReasonInsufficientMem, true
	}
}

// candidate is a card that fits one container, with what it would take.
type candidate struct {
	card             int32
	numa             int32
	mem, recMem      int64
	migGroup, migPos int16
	// before and after are the card's fullness in [0, 1] before and after
	// taking the container (see fullness).
	before, after float64
	// linkSum is the card's total link score (topology-aware placement).
	linkSum int64
}

// check reports whether card i in state c fits container cr of req, and
// what it would take. Every check upstream HAMi/Volcano makes is here, in
// the order static (health, mode, selectors, size) then dynamic (gang,
// share count, exclusivity, cores, MIG instance, memory).
func (d *Devices) check(i int, c *cardState, cr *request.Container, req *request.Pod) (reason, candidate) {
	ci := &d.info[i]
	cand := candidate{card: int32(i), numa: ci.numa, migGroup: -1, migPos: -1, linkSum: ci.linkSum}
	switch {
	case !ci.healthy:
		return rUnhealthy, cand
	case ci.cordoned:
		return rCordoned, cand
	case req.Mode != "" && req.Mode != ci.mode:
		return rMode, cand
	case cardfit.TypeExcluded(req.UseType, req.NoUseType, ci.typUpper):
		return rType, cand
	case cardfit.Excluded(req.UseUUID, req.NoUseUUID, ci.uuid):
		return rUUID, cand
	}
	mem := cr.MemOn(ci.memMiB)
	cand.mem, cand.recMem = mem, mem
	if ci.mig == nil && (mem > ci.memMiB || cr.Cores > ci.coresTotal) {
		return rTooSmall, cand
	}
	switch {
	case req.Gang != "" && c.hasGang(req.Gang):
		return rGang, cand
	case req.Rules != 0 && ci.exclusiveApplies() && c.holdsRule(req.Rules):
		return rExclRule, cand
	case c.UsedNum >= ci.count:
		return rShareCount, cand
	case cr.Cores >= fullCores && c.UsedNum > 0:
		return rExclusive, cand
	case cr.Cores == 0 && c.UsedCores >= ci.coresTotal:
		return rCoresFull, cand
	case c.UsedCores+cr.Cores > ci.coresTotal:
		return rCores, cand
	}
	if ci.mig != nil {
		g, pos, inst, ok, busy := ci.mig.Fit(c.migGroup, c.migUsed, mem)
		switch {
		case !ok && busy:
			return rMIGBusy, cand
		case !ok:
			return rNoMIG, cand
		}
		cand.migGroup, cand.migPos, cand.mem = g, pos, inst
	}
	if c.UsedMiB+cand.mem > ci.memMiB {
		return rMemory, cand
	}
	cand.before = fullness(ci, c, 0, 0, 0)
	cand.after = fullness(ci, c, cand.mem, cr.Cores, 1)
	return fits, cand
}

// fullness is the mean of the card's memory, cores and share-count use
// fractions after adding the deltas, in [0, 1]. Binpack prefers the card
// that is fullest after placement; spread the emptiest before it.
func fullness(ci *cardInfo, c *cardState, dMem int64, dCores, dNum int32) float64 {
	f := float64(c.UsedMiB+dMem) / float64(ci.memMiB)
	if ci.coresTotal > 0 {
		f += float64(c.UsedCores+dCores) / float64(ci.coresTotal)
	}
	if ci.count > 0 {
		f += float64(c.UsedNum+dNum) / float64(ci.count)
	}
	return min(max(f/3, 0), 1)
}

// explain builds the failure status of container f, which did not fit
// with the cards in state work: one reason per rejected card kind, and a
// shortage reason when enough cards were not rejected yet too few were
// chosen (NUMA binding or fewer fitting cards than requested). forced are
// the cards the container had to take (the cards of the init container
// before it, see choosePhased): one of them not fitting is the reason, with
// ReasonReusedCard.
func (d *Devices) explain(req *request.Pod, f int, work []cardState, forced []int32) *device.Status {
	cr := &req.Ctrs()[f]
	forcedFails := false
	reasons, fitting := cardfit.Explain(len(work), func(i int) (reason, candidate) {
		code, c := d.check(i, &work[i], cr, req)
		forcedFails = forcedFails || code != fits && slices.Contains(forced, int32(i))
		return code, c
	}, describe)
	switch {
	case forcedFails:
		reasons.Add(ReasonReusedCard, false)
	case fitting >= int(cr.Nums) && req.NUMABind:
		reasons.Add(ReasonNUMASplit, false)
	case fitting > 0:
		reasons.Add(ReasonTooFewFitting, false)
	}
	return reasons.Status()
}
