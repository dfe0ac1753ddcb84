package frag

import (
	"maps"
	"math"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/backends/cardledger"
)

// Scarcity: the fragment policy's regard for the card models that pods
// name (use-gputype, nouse-gputype).
//
// Fragmentation alone cannot see it. A class that may not use a card
// counts all of the card's free share as fragmented (FGD's measure), so
// taking that share lowers fragmentation: a pod that may run anywhere is
// drawn to the models the fewest classes name, whatever their supply. And
// a whole card taken strands no share, so nothing keeps such a pod off the
// model that other pods can run nowhere else. On openb's gpuspec33 that is
// what failed pods before 100% arrival: pods that may run anywhere filled
// the G3, V100 and P100 cards while G2 cards stayed idle, and the pods
// naming those models had nowhere to go (docs/quality.md, "Fragment at
// 100% arrival").
//
// So a placement also costs, per card, the share it takes (in milli)
// times the card model's pressure, weighted by scarcityWeight. A model's
// pressure sums, over the learned classes that name models and accept it,
// the class's share of the learned GPU demand over the share of the
// registered cards the class may use; a model named by more demand than
// its share of the cards has a pressure above 1. To that comes a prior:
// the named share of the demand as if spread evenly over the models, over
// each model's share of the cards, weighted by prior, so that a scarce
// model nobody has named yet is not free for the taking. The pressures see
// the whole window (pods naming a scarce model are often too few to be
// among the target's frequent shapes) and are published again when one
// moves by driftLimit. Without pods naming models there are no pressures
// and the policy is unchanged. The card choice within a node (the
// backend's fragRank) does not weigh scarcity: it matters between nodes of
// different models, and a node rarely mixes them.

// scarcityWeight weighs the scarcity cost against the fragmentation
// decrease. Measured on gpuspec33 (bench/results/quality-arr100-tuning.txt):
// on seeds 42-44 any weight from 0.1 to 1 lifts 100% arrival from 87.67
// to 92.06-94.35, and above 0.5 the 130% point drops (94.55 at 1 against
// 94.99). On seeds 42-51, 0.2 is the largest weight tried that loses
// nothing at 130% (95.00 against 94.99; 0.3: 94.96), at 93.65 for 100%.
// On the held-out pod lists that name models it loses 0.07 to 0.36 at
// 130% on three of four (bench/results/quality-arr100.csv): the pressure
// weighs named demand against registered, not free, cards, and reserves
// too much where little is named. 0 removes the cost.
const scarcityWeight = 0.2

// prior weighs the prior pressure (0: none; at 0 a model first named
// late draws the unrestricted pods until then; 1 was worse at both
// arrival points than 0.3).
const prior = 0.3

// Supply is one card model's shareable cards on one node.
type Supply struct {
	Cards  int32
	MemMiB int64
}

// RegisterSupply records the node's shareable cards by model (upper-cased),
// from which the pressures learn the share of the cards each class may
// use. The backend calls it for every node it decodes; it only keeps the
// counts (a map comparison when the node is unchanged), and the next
// publish of the target reads them. Nodes that stop registering cards keep
// their last count.
func (w *Workload) RegisterSupply(node string, s map[string]Supply) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, ok := w.supply[node]
	if ok && maps.Equal(old, s) {
		return
	}
	if w.supply == nil {
		w.supply = make(map[string]map[string]Supply)
		w.total = make(map[string]Supply)
	}
	for typ, o := range old {
		t := w.total[typ]
		t.Cards -= o.Cards
		t.MemMiB -= o.MemMiB
		if t.Cards == 0 {
			delete(w.total, typ)
		} else {
			w.total[typ] = t
		}
	}
	for typ, n := range s {
		t := w.total[typ]
		t.Cards += n.Cards
		t.MemMiB += n.MemMiB
		w.total[typ] = t
	}
	w.supply[node] = s
}

// pressure is each card model's pressure under the classes, whose
// weights need not be normalised (nil when no class names a model or no
// cards are registered). Called with mu held.
func (w *Workload) pressure(classes []class) map[string]float64 {
	total := w.total
	var cards int32
	var mem int64
	for _, s := range total {
		cards += s.Cards
		mem += s.MemMiB
	}
	if cards == 0 {
		return nil
	}
	meanMem := float64(mem) / float64(cards)
	var demand float64
	for k := range classes {
		demand += classes[k].weight * classes[k].cardsAsked(meanMem)
	}
	var press map[string]float64
	// The prior: the named share of the demand, as if spread evenly over
	// the models, so that a model nobody has named yet is not free.
	var named float64
	for k := range classes {
		if classes[k].UseType != "" || classes[k].NoUseType != "" {
			named += classes[k].weight * classes[k].cardsAsked(meanMem)
		}
	}
	if named > 0 && prior > 0 {
		press = make(map[string]float64, len(total))
		for typ, s := range total {
			press[typ] = prior * named / demand / float64(len(total)) * float64(cards) / float64(s.Cards)
		}
	}
	for k := range classes {
		cl := &classes[k]
		if cl.UseType == "" && cl.NoUseType == "" {
			continue
		}
		var usable int32
		for typ, s := range total {
			if !cardfit.TypeExcluded(cl.UseType, cl.NoUseType, typ) {
				usable += s.Cards
			}
		}
		if usable == 0 || demand == 0 {
			continue
		}
		p := cl.weight * cl.cardsAsked(meanMem) / demand * float64(cards) / float64(usable)
		for typ := range total {
			if !cardfit.TypeExcluded(cl.UseType, cl.NoUseType, typ) {
				if press == nil {
					press = make(map[string]float64, len(total))
				}
				press[typ] += p
			}
		}
	}
	return press
}

// cardsAsked is the shape's demand in cards: its share of a card (the
// percentage of memory, else of cores, else its memory against a card of
// meanMem MiB, at most one) times the cards it asks for.
func (s *Shape) cardsAsked(meanMem float64) float64 {
	share := 1.0
	switch {
	case s.Pct > 0:
		share = float64(s.Pct) / 100
	case s.Cores > 0:
		share = float64(s.Cores) / fullCores
	case s.MemMiB > 0 && meanMem > 0:
		share = min(float64(s.MemMiB)/meanMem, 1)
	}
	return float64(s.Nums) * share
}

// Pressured reports whether the target has pressures: some class names a
// card model. Without, placements cost no scarcity.
func (t *Target) Pressured() bool { return len(t.press) > 0 }

// Pressure is the model's (upper-cased) pressure under the target, 0 for
// a model without.
func (t *Target) Pressure(model string) float64 { return t.press[model] }

// Scarcity sums the scarcity cost of a placement card by card: per card,
// the share taken (in milli, as Card.Free counts it) times its model's
// pressure, weighted by scarcityWeight.
type Scarcity struct{ cost float64 }

// Add adds card c's change from state before to after under target t.
func (s *Scarcity) Add(t *Target, c *Card, before, after *cardledger.Usage) {
	if p := t.press[c.Type]; p != 0 {
		s.cost += p * (c.Free(before) - c.Free(after))
	}
}

// Cost is the placement's scarcity cost, in the units of F.
func (s *Scarcity) Cost() float64 { return scarcityWeight * s.cost }

// pressDrift is the largest change of a model's pressure between a and b.
func pressDrift(a, b map[string]float64) float64 {
	var d float64
	for typ, p := range a {
		d = max(d, math.Abs(p-b[typ]))
	}
	for typ, p := range b {
		d = max(d, math.Abs(p-a[typ]))
	}
	return d
}
