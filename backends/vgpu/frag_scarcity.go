package vgpu

import (
	"maps"
	"math"

	"github.com/vgpushare/vshare/backends/cardfit"
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
// times the card model's pressure, weighted by fragScarcity. A model's
// pressure sums, over the learned classes that name models and accept it,
// the class's share of the learned GPU demand over the share of the
// registered cards the class may use; a model named by more demand than
// its share of the cards has a pressure above 1. To that comes a prior:
// the named share of the demand as if spread evenly over the models, over
// each model's share of the cards, weighted by fragPrior, so that a scarce
// model nobody has named yet is not free for the taking. The pressures see
// the whole window (pods naming a scarce model are often too few to be
// among the target's frequent shapes) and are published again when one
// moves by fragDrift. Without pods naming models there are no pressures
// and the policy is unchanged. The card choice within a node (fragRank)
// does not weigh scarcity: it matters between nodes of different models,
// and a node rarely mixes them.

// fragScarcity weighs the scarcity cost against the fragmentation
// decrease. Measured on gpuspec33 (bench/results/quality-arr100-tuning.txt):
// on seeds 42-44 any weight from 0.1 to 1 lifts 100% arrival from 87.67
// to 92.06-94.35, and above 0.5 the 130% point drops (94.55 at 1 against
// 94.99). On seeds 42-51, 0.2 is the largest weight tried that loses
// nothing at 130% (95.00 against 94.99; 0.3: 94.96), at 93.65 for 100%.
// On the held-out pod lists that name models it loses 0.07 to 0.36 at
// 130% on three of four (bench/results/quality-arr100.csv): the pressure
// weighs named demand against registered, not free, cards, and reserves
// too much where little is named. 0 removes the cost.
const fragScarcity = 0.2

// fragPrior weighs the prior pressure (0: none; at 0 a model first named
// late draws the unrestricted pods until then; 1 was worse at both
// arrival points than 0.3).
const fragPrior = 0.3

// typeSupply is one card model's cards on one node.
type typeSupply struct {
	cards  int32
	memMiB int64
}

// registerSupply records the node's schedulable cards by model, from which
// pressure learns the share of the cards each class may use. The backend
// calls it for every node it decodes; it only keeps the counts (a map
// comparison when the node is unchanged), and the next publish of the
// target reads them. Nodes that stop registering cards keep their last
// count.
func (w *workload) registerSupply(node string, s map[string]typeSupply) {
	w.mu.Lock()
	defer w.mu.Unlock()
	old, ok := w.supply[node]
	if ok && maps.Equal(old, s) {
		return
	}
	if w.supply == nil {
		w.supply = make(map[string]map[string]typeSupply)
		w.total = make(map[string]typeSupply)
	}
	for typ, o := range old {
		t := w.total[typ]
		t.cards -= o.cards
		t.memMiB -= o.memMiB
		if t.cards == 0 {
			delete(w.total, typ)
		} else {
			w.total[typ] = t
		}
	}
	for typ, n := range s {
		t := w.total[typ]
		t.cards += n.cards
		t.memMiB += n.memMiB
		w.total[typ] = t
	}
	w.supply[node] = s
}

// supplyOf is the model → cards summary of the node's cards that may
// take a share (healthy, not MIG).
func (d *Devices) supplyOf() map[string]typeSupply {
	s := make(map[string]typeSupply, 1)
	for i := range d.info {
		ci := &d.info[i]
		if !ci.healthy || ci.mig != nil {
			continue
		}
		t := s[ci.typUpper]
		t.cards++
		t.memMiB += ci.memMiB
		s[ci.typUpper] = t
	}
	return s
}

// pressure is each card model's pressure under the classes, whose
// weights need not be normalised (nil when no class names a model or no
// cards are registered). Called with mu held.
func (w *workload) pressure(classes []fragClass) map[string]float64 {
	total := w.total
	var cards int32
	var mem int64
	for _, s := range total {
		cards += s.cards
		mem += s.memMiB
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
		if classes[k].useType != "" || classes[k].noUseType != "" {
			named += classes[k].weight * classes[k].cardsAsked(meanMem)
		}
	}
	if named > 0 && fragPrior > 0 {
		press = make(map[string]float64, len(total))
		for typ, s := range total {
			press[typ] = fragPrior * named / demand / float64(len(total)) * float64(cards) / float64(s.cards)
		}
	}
	for k := range classes {
		cl := &classes[k]
		if cl.useType == "" && cl.noUseType == "" {
			continue
		}
		var usable int32
		for typ, s := range total {
			if !cardfit.TypeExcluded(cl.useType, cl.noUseType, typ) {
				usable += s.cards
			}
		}
		if usable == 0 || demand == 0 {
			continue
		}
		p := cl.weight * cl.cardsAsked(meanMem) / demand * float64(cards) / float64(usable)
		for typ := range total {
			if !cardfit.TypeExcluded(cl.useType, cl.noUseType, typ) {
				if press == nil {
					press = make(map[string]float64, len(total))
				}
				press[typ] += p
			}
		}
	}
	return press
}

// cardsAsked is the class's demand in cards: its share of a card (the
// percentage of memory, else of cores, else its memory against a card of
// meanMem MiB, at most one) times the cards it asks for.
func (s *fragShape) cardsAsked(meanMem float64) float64 {
	share := 1.0
	switch {
	case s.pct > 0:
		share = float64(s.pct) / 100
	case s.cores > 0:
		share = float64(s.cores) / fullCores
	case s.memMiB > 0 && meanMem > 0:
		share = min(float64(s.memMiB)/meanMem, 1)
	}
	return float64(s.nums) * share
}

// scarcity is the cost of the cards' change from the node's cards to work
// under target t: per card, the share taken (in milli, as cardFree counts
// it) times its model's pressure, weighted by fragScarcity.
func (d *Devices) scarcity(t *fragTarget, work []cardState) float64 {
	if len(t.press) == 0 {
		return 0
	}
	var cost float64
	for i := range work {
		p := t.press[d.info[i].typUpper]
		if p == 0 || work[i].Usage == d.cards[i].Usage {
			continue
		}
		cost += p * (d.cardFree(i, &d.cards[i]) - d.cardFree(i, &work[i]))
	}
	return fragScarcity * cost
}

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
