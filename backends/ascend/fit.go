package ascend

import (
	"cmp"
	"slices"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/vnpu"
)

// reason is why a card does not fit a container (cardfit.Reason), in the
// order check tries them.
type reason = cardfit.Reason

const (
	fits              = cardfit.Fits
	rUnhealthy reason = iota
	rCordoned
	rType
	rUUID
	rMode
	rTooSmall
	rCount
	rExclusive
	rWholeBusy
	rCoresFull
	rCores
	rSlicing
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
	case rType:
		return ReasonTypeMismatch, false
	case rUUID:
		return ReasonUUIDExcluded, false
	case rMode:
		return ReasonModeMismatch, false
	case rTooSmall:
		return ReasonCardTooSmall, false
	case rCount:
		return ReasonCountFull, true
	case rExclusive:
		return ReasonExclusiveBusy, true
	case rWholeBusy:
		return ReasonWholeBusy, true
	case rCoresFull:
		return ReasonCoresFull, true
	case rCores:
		return ReasonInsufficientCo, true
	case rSlicing:
		return ReasonSlicing, true
	default:
		return ReasonInsufficientMe, true
	}
}

// candidate is a card that fits one container, with what it would take.
type candidate struct {
	use
	// before and after are the card's fullness in [0, 1] before and after.
	before, after float64
}

// check reports whether card i in state c fits container cr of req: static
// checks (health, type, selectors, mode, size) first, then the dynamic ones
// (vNPU count, exclusivity, cores, slicing, memory).
func (d *Devices) check(i int, c *cardState, cr *ctrRequest, req *podRequest) (reason, candidate) {
	ci := &d.info[i]
	cand := candidate{use: use{card: int32(i), ctr: int32(cr.ctr), tmpl: tmplNone}}
	switch {
	case !ci.healthy:
		return rUnhealthy, cand
	case ci.cordoned:
		return rCordoned, cand
	case !ci.typeOK:
		return rType, cand
	case cardfit.Excluded(req.useUUID, req.noUseUUID, ci.id):
		return rUUID, cand
	case req.soft && !d.soft:
		return rMode, cand
	}
	if d.soft {
		cand.mem, cand.cores = cr.memMiB, cr.cores
		if cand.mem == 0 {
			cand.mem = ci.memMiB
		}
	} else {
		cand.mem, cand.tmpl = d.templateCharge(ci, cr.memMiB)
	}
	if cand.mem > ci.memMiB {
		return rTooSmall, cand
	}
	if c.UsedNum >= ci.count {
		return rCount, cand
	}
	if d.soft {
		switch {
		case cand.cores >= fullCores && c.UsedNum > 0:
			return rExclusive, cand
		case cand.cores == 0 && c.UsedCores >= fullCores:
			return rCoresFull, cand
		case c.UsedCores+cand.cores > fullCores:
			return rCores, cand
		}
	} else {
		switch c.slice.Check(d.b.chip, d.template(cand.tmpl)) {
		case vnpu.NoConflict:
		case vnpu.ConflictWhole:
			return rWholeBusy, cand
		case vnpu.ConflictMemory:
			return rMemory, cand
		default:
			return rSlicing, cand
		}
	}
	if c.UsedMiB+cand.mem > ci.memMiB {
		return rMemory, cand
	}
	cand.before = d.fullness(ci, c, 0, 0)
	cand.after = d.fullness(ci, c, cand.mem, d.charge(cand.use))
	return fits, cand
}

// templateCharge returns the memory recorded and the template charged for
// a template-mode request of mem MiB: the smallest fitting template, or the
// whole card (its memory when the request names none, else the chip's
// allocatable memory, as HAMi records it).
func (d *Devices) templateCharge(ci *cardInfo, mem int64) (int64, int16) {
	if mem == 0 {
		return ci.memMiB, tmplWhole
	}
	i := d.templateOf(mem)
	if i >= 0 {
		return d.templates[i].MemoryMiB, i
	}
	return min(d.b.chip.Total.MemoryMiB, ci.memMiB), tmplWhole
}

// fullness is the mean of the card's memory and cores use fractions.
func (d *Devices) fullness(ci *cardInfo, c *cardState, dMem int64, dCores int32) float64 {
	f := float64(c.UsedMiB+dMem) / float64(ci.memMiB)
	if ci.coresCap > 0 {
		f += float64(c.UsedCores+dCores) / float64(ci.coresCap)
	}
	return min(max(f/2, 0), 1)
}

// choose picks the cards of every container in container order on a copy
// of the cards (work). failed is the index in req.ctrs of the first
// container that does not fit (-1 when all do); work then holds the cards
// as the earlier containers left them, for explain.
func (d *Devices) choose(req *podRequest, policy string) (picks []candidate, work []cardState, failed int) {
	work = slices.Clone(d.cards)
	var cands []candidate
	for f := range req.ctrs {
		cr := &req.ctrs[f]
		cands = cardfit.Fitting(cands[:0], len(work), func(i int) (reason, candidate) { return d.check(i, &work[i], cr, req) })
		sel := d.selectCards(cands, int(cr.nums), policy)
		if sel == nil {
			return picks, work, f
		}
		for _, c := range sel {
			applyUse(d.shared, &work[c.card], c.use, 1)
			picks = append(picks, c)
		}
	}
	return picks, work, -1
}

// selectCards returns k of cands, or nil when there are fewer: in policy
// order (binpack: fullest after placement; spread: emptiest before; ties
// by card index), and for several cards of an Ascend910 node whose cards
// carry NetworkIDs, from one network group when one can hold them all.
func (d *Devices) selectCards(cands []candidate, k int, policy string) []candidate {
	if k <= 0 || len(cands) < k {
		return nil
	}
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if policy == device.PolicySpread {
			if c := cmp.Compare(a.before, b.before); c != 0 {
				return c
			}
		} else if c := cmp.Compare(b.after, a.after); c != 0 {
			return c
		}
		return cmp.Compare(a.card, b.card)
	})
	if !d.network || k == 1 {
		return slices.Clone(cands[:k])
	}
	return d.selectByNetwork(cands, k, policy)
}

// selectByNetwork takes k ranked candidates from as few network groups as
// possible: a group that holds all k (binpack: the smallest such group,
// spread: the largest; ties to the lower NetworkID), else the largest
// groups first, as HAMi does.
func (d *Devices) selectByNetwork(cands []candidate, k int, policy string) []candidate {
	groups := map[int64][]candidate{}
	var ids []int64
	for _, c := range cands {
		id := d.info[c.card].network
		if _, ok := groups[id]; !ok {
			ids = append(ids, id)
		}
		groups[id] = append(groups[id], c)
	}
	slices.SortFunc(ids, func(a, b int64) int {
		na, nb := len(groups[a]), len(groups[b])
		fa, fb := na >= k, nb >= k
		switch {
		case fa != fb && fa:
			return -1
		case fa != fb:
			return 1
		case fa && policy != device.PolicySpread && na != nb:
			return cmp.Compare(na, nb)
		case na != nb:
			return cmp.Compare(nb, na)
		}
		return cmp.Compare(a, b)
	})
	out := make([]candidate, 0, k)
	for _, id := range ids {
		for _, c := range groups[id] {
			if len(out) == k {
				return out
			}
			out = append(out, c)
		}
	}
	return out
}

// score turns the picks into the node score in [0, device.MaxScore]: binpack
// is the chosen cards' mean fullness after placement, spread one minus
// their mean fullness before it. On Ascend910 nodes with network groups,
// networkWeight points of it go to the share of each container's cards in
// its largest group (HAMi's Ascend910NetworkWeight).
func (d *Devices) score(req *podRequest, picks []candidate, policy string) float64 {
	if len(picks) == 0 {
		return 0
	}
	s := cardfit.NodeScore(policy, len(picks), func(i int) (float64, float64) { return picks[i].before, picks[i].after })
	if d.network {
		s = s*(device.MaxScore-networkWeight)/device.MaxScore + networkWeight*d.groupShare(req, picks)
	}
	return min(max(s, 0), device.MaxScore)
}

// groupShare is the mean over containers of the share of their cards in
// their largest network group.
func (d *Devices) groupShare(req *podRequest, picks []candidate) float64 {
	var total float64
	for _, cr := range req.ctrs {
		counts := map[int64]int{}
		n, best := 0, 0
		for _, p := range picks {
			if int(p.ctr) != cr.ctr {
				continue
			}
			id := d.info[p.card].network
			counts[id]++
			n++
			best = max(best, counts[id])
		}
		if n > 0 {
			total += float64(best) / float64(n)
		}
	}
	return total / float64(len(req.ctrs))
}

// explain builds the failure status of container f, which did not fit the
// cards in state work.
func (d *Devices) explain(req *podRequest, f int, work []cardState) *device.Status {
	cr := &req.ctrs[f]
	if int(cr.nums) > len(work) {
		return device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewCards)
	}
	reasons, fitting := cardfit.Explain(len(work), func(i int) (reason, candidate) { return d.check(i, &work[i], cr, req) }, describe)
	if fitting > 0 {
		reasons.Add(ReasonTooFewFitting, false)
	}
	return reasons.Status()
}

// FilterNode reports whether the pod's containers fit the node's cards,
// with one reason per rejected card kind when they do not. Pods without a
// request of this chip type fit; invalid requests give an Error status.
func (d *Devices) FilterNode(pod *v1.Pod, policy string) *device.Status {
	var req podRequest
	if err := d.b.parse(pod, &req); err != nil {
		return device.NewStatus(device.Error, "invalid "+d.b.name+" request: "+err.Error())
	}
	if len(req.ctrs) == 0 {
		return nil
	}
	_, work, failed := d.choose(&req, policy)
	if failed < 0 {
		return nil
	}
	st := d.explain(&req, failed, work)
	if v := klog.V(5); v.Enabled() {
		v.InfoS("Ascend filter rejected node", "pod", klog.KObj(pod), "node", d.node, "chip", d.b.name, "reasons", st.Message())
	}
	return st
}

// ScoreNode scores the node from the cards Allocate would choose (see
// score). Pods that do not fit or have no valid request score 0.
func (d *Devices) ScoreNode(pod *v1.Pod, policy string) float64 {
	var req podRequest
	if err := d.b.parse(pod, &req); err != nil || len(req.ctrs) == 0 {
		return 0
	}
	picks, _, failed := d.choose(&req, policy)
	if failed >= 0 {
		return 0
	}
	return d.score(&req, picks, policy)
}

// ResultKey implements device.ResultKeyer: FilterNode and ScoreNode read
// the pod only through its parsed request (each asking container's count,
// memory and cores, the number of containers, the slicing mode and the
// card selectors) and the policy. Pods without a valid request have no key.
func (b *Backend) ResultKey(pod *v1.Pod, policy string) (string, bool) {
	var req podRequest
	if err := b.parse(pod, &req); err != nil || len(req.ctrs) == 0 {
		return "", false
	}
	k := make([]byte, 0, 64)
	for _, c := range req.ctrs {
		k = strconv.AppendInt(k, int64(c.ctr), 10)
		k = strconv.AppendInt(append(k, ','), int64(c.nums), 10)
		k = strconv.AppendInt(append(k, ','), c.memMiB, 10)
		k = strconv.AppendInt(append(k, ','), int64(c.cores), 10)
		k = strconv.AppendBool(append(k, ','), c.coreSet)
		k = append(k, ';')
	}
	k = strconv.AppendInt(k, int64(req.containers), 10)
	k = strconv.AppendBool(append(k, 0), req.soft)
	for _, f := range [...]string{req.useUUID, req.noUseUUID, policy} {
		k = append(append(k, 0), f...)
	}
	return string(k), true
}

// ResultEpoch implements device.ResultKeyer: nothing but the request and
// the node's cards decides a result.
func (b *Backend) ResultEpoch() uint64 { return 0 }
