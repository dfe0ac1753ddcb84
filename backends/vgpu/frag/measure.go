package frag

import (
	"math"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/device"
)

// scale is the fragmentation decrease (in card milli) that moves the
// logistic from 0.5 to 0.73, as in FGD.
const scale = 1000

// levels is the number of whole steps the fragmentation term is scored
// in, FGD's granularity. Finer steps rank on differences that are mostly
// noise of the learned mix (measured: worse on the openb traces).
const levels = 99

// tie scales the packing term within one step; below 1 so it never
// crosses a step.
const tie = 0.999

// MilliPerCard is a whole card in the units fragmentation is counted in.
const MilliPerCard = 1000

// fullCores is a whole card's cores in percent, as the vGPU backend
// counts them (vgpu-cores=100 asks for an unused card).
const fullCores = 100

// Card is the fixed figures of one card, as the fragment policy reads
// them.
type Card struct {
	// Type is the card's model, upper-cased (what use-gputype matches).
	Type string
	// MemMiB is the card's memory; Cores its cores (100 a whole card's
	// SMs, in the registration's unit); Count how many containers may
	// share it.
	MemMiB int64
	Cores  int32
	Count  int32
	// Shareable is set for a healthy card shared by hami-core: only such
	// cards have a share another request could take.
	Shareable bool
}

// Free is the share of the card in state u that another hami-core
// request could still take, in milli: the smaller of its free cores and
// free memory; 0 for cards that are not shareable or fully shared.
func (c *Card) Free(u *cardledger.Usage) float64 {
	if !c.Shareable || u.UsedNum >= c.Count || c.MemMiB <= 0 {
		return 0
	}
	free := float64(c.MemMiB-u.UsedMiB) / float64(c.MemMiB)
	if c.Cores > 0 {
		free = min(free, float64(c.Cores-u.UsedCores)/float64(c.Cores))
	}
	return MilliPerCard * max(free, 0)
}

// fits reports whether the card in state u serves class cl: the card
// check's conditions for a shareable card (Free is 0 for the others),
// without computing what the check reports besides.
func (cl *class) fits(c *Card, u *cardledger.Usage) bool {
	if cardfit.TypeExcluded(cl.UseType, cl.NoUseType, c.Type) {
		return false
	}
	mem := cl.memOn(c.MemMiB)
	switch {
	case mem > c.MemMiB, cl.Cores > c.Cores, u.UsedNum >= c.Count,
		cl.Cores >= fullCores && u.UsedNum > 0,
		cl.Cores == 0 && u.UsedCores >= c.Cores,
		u.UsedCores+cl.Cores > c.Cores:
		return false
	}
	return u.UsedMiB+mem <= c.MemMiB
}

// Use is what a pod takes outside the cards: CPU in milli-cores and
// memory in MiB (the backend's request.HostUse).
type Use struct{ CPUMilli, MemMiB int64 }

// hostFits reports whether the host (device.Host: Volcano's
// NodeInfo.Idle, which the plugin passes with every call), after a pod
// takes used, still has the class's CPU and memory. An unknown host is
// assumed to be plentiful.
func hostFits(h *device.Host, cl *class, used Use) bool {
	return !h.Known || h.CPUMilli-used.CPUMilli >= cl.CPU && h.MemMiB-used.MemMiB >= cl.HostMem
}

// Measure is a node's cards as a target's classes see them. Init it for
// the node's card count, then Add every card in card order; it is
// read-only after.
type Measure struct {
	t    *Target
	free []float64
	idle float64
	// fit[k*n+i] says whether card i serves class k; count[k] and
	// usable[k] are the number and free milli of the cards serving k.
	fit    []bool
	count  []int32
	usable []float64
}

// Init prepares m to measure n cards under target t.
func (m *Measure) Init(t *Target, n int) {
	nk := len(t.classes)
	*m = Measure{t: t, free: make([]float64, n), fit: make([]bool, nk*n), count: make([]int32, nk),
		usable: make([]float64, nk)}
}

// Add measures card i, c in state u. Cards are added in card order, so
// the sums are the same whoever measures the node.
func (m *Measure) Add(i int, c *Card, u *cardledger.Usage) {
	free := c.Free(u)
	m.free[i] = free
	m.idle += free
	if free <= 0 {
		return
	}
	n := len(m.free)
	for k := range m.t.classes {
		if m.t.classes[k].fits(c, u) {
			m.fit[k*n+i] = true
			m.count[k]++
			m.usable[k] += free
		}
	}
}

// Target is the target the node was measured under.
func (m *Measure) Target() *Target { return m.t }

// Idle is the free milli of the node's cards (see Card.Free).
func (m *Measure) Idle() float64 { return m.idle }

// Value is F with the host's free CPU and memory minus used.
func (m *Measure) Value(h device.Host, used Use) float64 {
	var frag float64
	for k := range m.t.classes {
		cl := &m.t.classes[k]
		usable := m.usable[k]
		if m.count[k] < cl.Nums || !hostFits(&h, cl, used) {
			usable = 0
		}
		frag += cl.weight * (m.idle - usable)
	}
	return frag
}

// ValueWith is F after card i, c, changes to state u, with the host's
// free CPU and memory minus used: the measure of one candidate card
// without measuring the other cards again.
func (m *Measure) ValueWith(i int, c *Card, u *cardledger.Usage, h device.Host, used Use) float64 {
	n := len(m.free)
	free := c.Free(u)
	idle := m.idle - m.free[i] + free
	var frag float64
	for k := range m.t.classes {
		cl := &m.t.classes[k]
		count, usable := m.count[k], m.usable[k]
		if m.fit[k*n+i] {
			count--
			usable -= m.free[i]
		}
		if free > 0 && cl.fits(c, u) {
			count++
			usable += free
		}
		if count < cl.Nums || !hostFits(&h, cl, used) {
			usable = 0
		}
		frag += cl.weight * (idle - usable)
	}
	return frag
}

// Score is the node score, in [0, device.MaxScore], of a fragmentation
// decrease delta (F before a placement minus F after it) and a packing
// term pack in [0, 1] (how full the chosen cards end): the decrease
// through FGD's logistic in whole steps, the packing within a step.
func Score(delta, pack float64) float64 {
	frag := 1 / (1 + math.Exp(-delta/scale))
	step := float64(device.MaxScore) / (levels + 1)
	return step * (math.Trunc(levels*frag) + tie*pack)
}
