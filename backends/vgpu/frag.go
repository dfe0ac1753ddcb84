package vgpu

import (
	"math"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/device"
)

// The fragment policy is Fragmentation Gradient Descent (Weng et al.,
// ATC'23) over what a live scheduler can know, with these changes:
//
//   - The target workload is learned online from the requests the backend
//     observes (see workload), not read from a trace.
//   - Whether a card serves a request class is decided by check's own
//     conditions (memory, cores, share count, exclusivity, type
//     selectors), so fragmentation is measured in the cards' own terms.
//   - A class the node's free CPU or free memory cannot host strands all
//     the node's free cards for it. FGD weighs CPU only; host memory
//     strands cards just the same (measured: it is what wins gpushare100
//     and takes 0.2 points off multigpu50).
//   - FGD scores int(100 * sigmoid(ΔF/1000)) and leaves the many ties to
//     an arbitrary node order. Here the fragmentation decrease decides in
//     the same whole steps, and within a step the node whose chosen cards
//     end fullest wins (best fit of cards), which keeps whole cards free
//     for the whole-card requests instead of scattering shares.
//   - Cards are chosen fullest after placement first (the binpack order),
//     the fragmentation they leave breaking ties.
//   - A pod without vGPUs, when the plugin scores it, goes where its CPU
//     and memory strand the fewest cards, then where the fewest cards are
//     idle.
//   - A placement also costs the card share it takes times its card
//     model's pressure, the learned demand of the pods naming that model
//     (use-gputype, nouse-gputype) against the model's share of the
//     registered cards (frag_scarcity.go). FGD's measure alone draws the
//     pods that may run anywhere to the models the fewest classes name,
//     whatever their supply, and fails the pods that can run only there.
//
// Node fragmentation F sums, over the target classes with their weights,
// the free card milli the class could not use on the node: all of it when
// fewer cards than the class asks for fit or the node lacks the class's
// CPU or memory, else the free milli of the cards it does not fit.

// fragScale is the fragmentation decrease (in card milli) that moves the
// logistic from 0.5 to 0.73, as in FGD.
const fragScale = 1000

// fragLevels is the number of whole steps the fragmentation term is
// scored in, FGD's granularity. Finer steps rank on differences that are
// mostly noise of the learned mix (measured: worse on the openb traces).
const fragLevels = 99

// fragTie scales the packing term within one step; below 1 so it never
// crosses a step.
const fragTie = 0.999

// milliPerCard is a whole card in the units fragmentation is counted in.
const milliPerCard = 1000

// hostIdle is what the node has free outside its cards.
type hostIdle struct {
	cpuMilli, memMiB int64
	known            bool
}

// hostUse is what a pod takes outside the cards.
type hostUse struct{ cpuMilli, memMiB int64 }

// hostOf is the fragment policy's view of the node's free CPU and memory
// (device.Host: Volcano's NodeInfo.Idle), which decide whether a request
// class could still run there. The plugin passes it with every call
// (device.HostAware); without it the host is assumed to be plentiful.
func hostOf(h device.Host) hostIdle {
	return hostIdle{cpuMilli: h.CPUMilli, memMiB: h.MemMiB, known: h.Known}
}

// fits reports whether the host, after a pod takes used, still has the
// class's CPU and memory.
func (h hostIdle) fits(cl *fragClass, used hostUse) bool {
	return !h.known || h.cpuMilli-used.cpuMilli >= cl.cpu && h.memMiB-used.memMiB >= cl.hostMem
}

// cardFree is the share of card i (in state c) that another hami-core
// request could still take, in milli: the smaller of its free cores and
// free memory; 0 for unhealthy, MIG and fully shared cards.
func (d *Devices) cardFree(i int, c *cardState) float64 {
	ci := &d.info[i]
	if !ci.healthy || ci.mig != nil || c.UsedNum >= ci.count || ci.memMiB <= 0 {
		return 0
	}
	free := float64(ci.memMiB-c.UsedMiB) / float64(ci.memMiB)
	if ci.coresTotal > 0 {
		free = min(free, float64(ci.coresTotal-c.UsedCores)/float64(ci.coresTotal))
	}
	return milliPerCard * max(free, 0)
}

// fragNode is a node's cards as the target classes see them.
type fragNode struct {
	t *fragTarget
	// gen is the generation of the node's cards it was measured at, for
	// Devices.fragNow.
	gen  uint64
	free []float64
	idle float64
	// fit[k*n+i] says whether card i serves class k; count[k] and
	// usable[k] are the number and free milli of the cards serving k.
	fit    []bool
	count  []int32
	usable []float64
}

// classFits reports whether card i in state c serves class cl: check's
// conditions for a healthy hami-core card (cardFree is 0 for the others),
// without computing what check reports besides.
func (d *Devices) classFits(cl *fragClass, i int, c *cardState) bool {
	ci := &d.info[i]
	if cardfit.TypeExcluded(cl.useType, cl.noUseType, ci.typUpper) {
		return false
	}
	cr := ctrRequest{nums: cl.nums, memMiB: cl.memMiB, pct: cl.pct, cores: cl.cores}
	mem := cr.memOn(ci.memMiB)
	switch {
	case mem > ci.memMiB, cl.cores > ci.coresTotal, c.UsedNum >= ci.count,
		cl.cores >= fullCores && c.UsedNum > 0,
		cl.cores == 0 && c.UsedCores >= ci.coresTotal,
		c.UsedCores+cl.cores > ci.coresTotal:
		return false
	}
	return c.UsedMiB+mem <= ci.memMiB
}

// fragOf measures the node with cards in state cards.
func (d *Devices) fragOf(t *fragTarget, cards []cardState) *fragNode {
	n, nk := len(cards), len(t.classes)
	f := &fragNode{t: t, free: make([]float64, n), fit: make([]bool, nk*n), count: make([]int32, nk),
		usable: make([]float64, nk)}
	for i := range cards {
		f.free[i] = d.cardFree(i, &cards[i])
		f.idle += f.free[i]
	}
	for k := range t.classes {
		for i := range cards {
			if f.free[i] > 0 && d.classFits(&t.classes[k], i, &cards[i]) {
				f.fit[k*n+i] = true
				f.count[k]++
				f.usable[k] += f.free[i]
			}
		}
	}
	return f
}

// value is F with the host's free CPU and memory minus used.
func (f *fragNode) value(h hostIdle, used hostUse) float64 {
	var frag float64
	for k := range f.t.classes {
		cl := &f.t.classes[k]
		usable := f.usable[k]
		if f.count[k] < cl.nums || !h.fits(cl, used) {
			usable = 0
		}
		frag += cl.weight * (f.idle - usable)
	}
	return frag
}

// valueWith is F after card i changes to state c, with the host's free
// CPU and memory minus used: the measure of one candidate card without measuring the
// other cards again.
func (d *Devices) valueWith(f *fragNode, i int, c *cardState, h hostIdle, used hostUse) float64 {
	n := len(f.free)
	free := d.cardFree(i, c)
	idle := f.idle - f.free[i] + free
	var frag float64
	for k := range f.t.classes {
		cl := &f.t.classes[k]
		count, usable := f.count[k], f.usable[k]
		if f.fit[k*n+i] {
			count--
			usable -= f.free[i]
		}
		if free > 0 && d.classFits(cl, i, c) {
			count++
			usable += free
		}
		if count < cl.nums || !h.fits(cl, used) {
			usable = 0
		}
		frag += cl.weight * (idle - usable)
	}
	return frag
}

// fragRank orders the candidate cards of a one-card container cr by
// fullness after placement (the binpack order), ties by the
// fragmentation they leave: it adds a term to the tied candidates' after,
// below any fullness step, so that sortCandidates' binpack order (after
// descending, card index on ties) is that order. Only ties between cards
// that differ (in state or kind) need measuring.
func (d *Devices) fragRank(cr *ctrRequest, work []cardState, cands []candidate, host hostIdle) {
	t := d.b.frag.target.Load()
	if len(t.classes) == 0 || len(cands) < 2 {
		return
	}
	top := 0
	for i := range cands {
		if cands[i].after > cands[top].after {
			top = i
		}
	}
	alike := true
	ties := 0
	for i := range cands {
		if cands[i].after == cands[top].after {
			ties++
			alike = alike && d.sameCard(int(cands[i].card), int(cands[top].card), work)
		}
	}
	if ties < 2 || alike {
		return
	}
	f := d.fragOf(t, work)
	span := float64(milliPerCard*len(work)) + 1
	best := cands[top].after
	for i := range cands {
		c := &cands[i]
		if c.after != best {
			continue
		}
		w := work[c.card]
		w.UsedMiB += c.mem
		w.UsedCores += cr.cores
		w.UsedNum++
		frag := d.valueWith(f, int(c.card), &w, host, hostUse{})
		c.after += 1e-9 * (1 - frag/span)
	}
}

// sameCard reports whether cards a and b are interchangeable: same kind
// and same use.
func (d *Devices) sameCard(a, b int, work []cardState) bool {
	ia, ib := &d.info[a], &d.info[b]
	wa, wb := &work[a], &work[b]
	return ia.typ == ib.typ && ia.memMiB == ib.memMiB && ia.coresTotal == ib.coresTotal && ia.count == ib.count &&
		ia.healthy == ib.healthy && ia.mig == nil && ib.mig == nil &&
		wa.UsedMiB == wb.UsedMiB && wa.UsedCores == wb.UsedCores && wa.UsedNum == wb.UsedNum
}

// fragNow is fragOf the node's current cards: kept while neither the
// cards nor the learned target change, since every pod scored on the node
// in between measures the same "before". Read-only once made.
func (d *Devices) fragNow(t *fragTarget) *fragNode {
	if f := d.fragMemo.Load(); f != nil && f.t == t && f.gen == d.gen {
		return f
	}
	f := d.fragOf(t, d.cards)
	f.gen = d.gen
	d.fragMemo.Store(f)
	return f
}

// fragScoreNode is ScoreNode under the fragment policy, in
// [0, device.MaxScore]. A pod without vGPUs (scored when the plugin asks)
// prefers the nodes where its CPU and memory strand the fewest cards.
func (d *Devices) fragScoreNode(pod *v1.Pod, host hostIdle) float64 {
	req, err := d.b.request(pod, PolicyFragment)
	if err != nil {
		return 0
	}
	use := req.host
	t := d.b.frag.target.Load()
	if req.empty() {
		f := d.fragNow(t)
		pack := 1.0
		if len(d.cards) > 0 {
			pack -= f.idle / float64(milliPerCard*len(d.cards))
		}
		return levels(logistic(f.value(host, hostUse{})-f.value(host, use)), pack)
	}
	// FilterNode has usually just chosen the cards for the same inputs;
	// the score, once computed, is kept with its result.
	fi := d.fragInputsOf(req, t, host)
	m := d.memo.get(req.key, req.hash, d.gen, fi)
	if m != nil {
		if m.st != nil {
			return 0
		}
		if m.fragScored.Load() {
			return math.Float64frombits(m.fragScore.Load())
		}
	}
	sc := d.fragScore(req, t, host)
	if sc < 0 {
		// Does not fit; FilterNode records that, with its reasons.
		return 0
	}
	if d.b.frag.target.Load() != t {
		// A new target was published meanwhile; the card choice may
		// have seen it.
		return sc
	}
	if m == nil {
		m = &filterMemo{key: req.key, gen: d.gen, frag: fi}
		d.memo.put(m, req.hash)
	}
	m.fragScore.Store(math.Float64bits(sc))
	m.fragScored.Store(true)
	return sc
}

// fragInputsOf returns the fragment policy's inputs for req on this node
// under target t, zero when req is not placed by that policy.
func (d *Devices) fragInputsOf(req *podRequest, t *fragTarget, host hostIdle) fragInputs {
	if req.cardPolicy != PolicyFragment && req.nodePolicy != PolicyFragment {
		return fragInputs{}
	}
	return fragInputs{target: t, host: host, use: req.host}
}

// fragScore is fragScoreNode for a non-empty request under target t: the
// score of the cards chosen, -1 when the pod does not fit. The
// fragmentation after placement includes the scarcity cost of the cards
// taken.
func (d *Devices) fragScore(req *podRequest, t *fragTarget, host hostIdle) float64 {
	if d.unservable(req) != nil {
		return -1
	}
	s := scratch{host: host}
	picks, work, failed := d.choose(req, &s)
	if failed >= 0 {
		return -1
	}
	if req.nodePolicy != PolicyFragment {
		return score(picks, req.nodePolicy)
	}
	before := d.fragNow(t)
	var after float64
	if len(picks) == 1 {
		c := picks[0].card
		after = d.valueWith(before, int(c), &work[c], host, req.host)
	} else {
		after = d.fragOf(t, work).value(host, req.host)
	}
	after += d.scarcity(t, work)
	// pack is how full the chosen cards end: the mean of their memory,
	// cores and share-count fractions, binpack's measure. (The scarcer
	// resource alone was measured too: 0.4 points worse on the default
	// trace, 0.05 better on gpushare100.)
	var pack float64
	for i := range picks {
		c := picks[i].card
		pack += fullness(&d.info[c], &work[c], 0, 0, 0) / float64(len(picks))
	}
	return levels(logistic(before.value(host, hostUse{})-after), pack)
}

// levels is the score of a fragmentation term frag and a packing term
// pack, both in [0, 1]: frag in fragLevels whole steps, pack within a step.
func levels(frag, pack float64) float64 {
	step := float64(device.MaxScore) / (fragLevels + 1)
	return step * (math.Trunc(fragLevels*frag) + fragTie*pack)
}

// logistic maps a fragmentation decrease to (0, 1).
func logistic(delta float64) float64 { return 1 / (1 + math.Exp(-delta/fragScale)) }

// podHost is the pod's CPU (milli-cores) and memory (MiB) request: the
// sum over its regular containers (requests, else limits).
func podHost(pod *v1.Pod) hostUse {
	var u hostUse
	for i := range pod.Spec.Containers {
		r := &pod.Spec.Containers[i].Resources
		q, ok := r.Requests[v1.ResourceCPU]
		if !ok {
			q = r.Limits[v1.ResourceCPU]
		}
		u.cpuMilli += q.MilliValue()
		m, ok := r.Requests[v1.ResourceMemory]
		if !ok {
			m = r.Limits[v1.ResourceMemory]
		}
		u.memMiB += m.Value() >> 20
	}
	return u
}
