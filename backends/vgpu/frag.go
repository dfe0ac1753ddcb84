package vgpu

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/backends/vgpu/frag"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
)

// PolicyFragment is the fragmentation-aware scheduling policy
// (deviceshare.SchedulePolicy: fragment). It places a pod where it
// destroys the least of the cards' usefulness to the workload the backend
// has recently seen (a Fragmentation Gradient Descent over the learned
// mix). The model (the learned workload, the fragmentation measure, the
// card models' scarcity) is package frag; this file feeds it the requests
// and the cards and ranks and scores with its measures.
const PolicyFragment = device.PolicyFragment

// ObserveRequest records the pod's vGPU request in the learned workload
// mix of the fragment policy. The plugin calls it for every pending pod
// it sees; a pod seen again in a later session counts once while it is in
// the window. Pods without a valid vGPU request are ignored.
func (b *Backend) ObserveRequest(pod *v1.Pod) {
	var req request.Pod
	if err := b.parse(pod, "", &req); err != nil || req.Empty() {
		return
	}
	var buf [4]frag.Shape
	shapes := buf[:0]
	for _, c := range req.Ctrs() {
		shapes = append(shapes, frag.Shape{Nums: c.Nums, Cores: c.Cores, Pct: c.Pct, MemMiB: c.MemMiB,
			CPU: req.Host.CPUMilli, HostMem: req.Host.MemMiB, UseType: req.UseType, NoUseType: req.NoUseType})
	}
	b.workload.Observe(cardledger.Key(pod), shapes)
}

// WorkloadGeneration identifies the learned mix the fragment policy scores
// against: under that policy a node's ScoreNode is a function of its
// cards, the pod and this generation, so callers may cache scores until
// it (or the node) changes.
func (b *Backend) WorkloadGeneration() uint64 { return b.workload.Target().Gen() }

// BareNodeScore is the fragment policy's score, for a pod without vGPUs,
// of a node that has no vGPU cards: the pod strands no card there, so the
// fragmentation term is at its middle step (no change), and there is no
// idle card, so the packing term is full. It is at least the score of any
// node with cards (a pod's CPU and memory can only strand cards), so under
// the fragment policy pods without vGPUs go to nodes without cards first.
func (b *Backend) BareNodeScore() float64 { return frag.Score(0, 1) }

// fragCard is card ci's figures for the fragment policy: only a healthy
// card shared by hami-core (not MIG) has a share to take.
func fragCard(ci *cardInfo) frag.Card {
	return frag.Card{Type: ci.typUpper, MemMiB: ci.memMiB, Cores: ci.coresTotal, Count: ci.count,
		Shareable: ci.healthy && ci.mig == nil}
}

// supplyOf is the model → cards summary of the node's cards that may
// take a share, for frag.Workload.RegisterSupply.
func (d *Devices) supplyOf() map[string]frag.Supply {
	s := make(map[string]frag.Supply, 1)
	for i := range d.info {
		fc := &d.info[i].fig
		if !fc.Shareable {
			continue
		}
		t := s[fc.Type]
		t.Cards++
		t.MemMiB += fc.MemMiB
		s[fc.Type] = t
	}
	return s
}

// measure measures the node with cards in state cards under target t.
func (d *Devices) measure(m *frag.Measure, t *frag.Target, cards []cardState) {
	m.Init(t, len(cards))
	for i := range cards {
		m.Add(i, &d.info[i].fig, &cards[i].Usage)
	}
}

// fragOf is a new measure of the node with cards in state cards.
func (d *Devices) fragOf(t *frag.Target, cards []cardState) *frag.Measure {
	m := new(frag.Measure)
	d.measure(m, t, cards)
	return m
}

// fragNow is fragOf the node's current cards, measured once while neither
// the cards nor the learned target change: every pod scored on the node in
// between (a pod without vGPUs is scored on every node) measures the same
// "before". Read-only once made.
func (d *Devices) fragNow(t *frag.Target) *frag.Measure {
	if m := d.now.Load(); m != nil && m.Target() == t {
		return m
	}
	m := d.fragOf(t, d.cards)
	d.now.Store(m)
	return m
}

// fragRank orders the candidate cards of a one-card container cr by
// fullness after placement (the binpack order), ties by the
// fragmentation they leave: it adds a term to the tied candidates' after,
// below any fullness step, so that sortCandidates' binpack order (after
// descending, card index on ties) is that order. Only ties between cards
// that differ (in state or kind) need measuring.
func (d *Devices) fragRank(cr *request.Container, work []cardState, cands []candidate, host device.Host) {
	t := d.b.workload.Target()
	if t.Empty() || len(cands) < 2 {
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
	span := float64(frag.MilliPerCard*len(work)) + 1
	best := cands[top].after
	for i := range cands {
		c := &cands[i]
		if c.after != best {
			continue
		}
		w := work[c.card]
		w.UsedMiB += c.mem
		w.UsedCores += cr.Cores
		w.UsedNum++
		left := f.ValueWith(int(c.card), &d.info[c.card].fig, &w.Usage, host, frag.Use{})
		c.after += 1e-9 * (1 - left/span)
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

// bareFragScore is the fragment policy's score, in [0, device.MaxScore],
// of the node for a pod without vGPUs (scored when the plugin asks): the
// nodes where its CPU and memory strand the fewest cards come first.
func (d *Devices) bareFragScore(req *request.Pod, host device.Host) float64 {
	f := d.fragNow(d.b.workload.Target())
	pack := 1.0
	if len(d.cards) > 0 {
		pack -= f.Idle() / float64(frag.MilliPerCard*len(d.cards))
	}
	return frag.Score(f.Value(host, frag.Use{})-f.Value(host, frag.Use(req.Host)), pack)
}

// fragScore is the fragment policy's node score of the cards chosen for a
// request (picks, leaving the cards in state work): how little
// fragmentation the placement adds for the learned workload, then how full
// the chosen cards end. The fragmentation after placement includes the
// scarcity cost of the cards taken.
func (d *Devices) fragScore(req *request.Pod, picks []pick, work []cardState, host device.Host) float64 {
	t := d.b.workload.Target()
	before := d.fragNow(t)
	var after float64
	if len(picks) == 1 {
		c := picks[0].card
		after = before.ValueWith(int(c), &d.info[c].fig, &work[c].Usage, host, frag.Use(req.Host))
	} else {
		after = d.fragOf(t, work).Value(host, frag.Use(req.Host))
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
	return frag.Score(before.Value(host, frag.Use{})-after, pack)
}

// scarcity is the scarcity cost (frag.Scarcity) of the cards' change from
// the node's cards to work under target t.
func (d *Devices) scarcity(t *frag.Target, work []cardState) float64 {
	if !t.Pressured() {
		return 0
	}
	var s frag.Scarcity
	for i := range work {
		if work[i].Usage != d.cards[i].Usage {
			s.Add(t, &d.info[i].fig, &d.cards[i].Usage, &work[i].Usage)
		}
	}
	return s.Cost()
}
