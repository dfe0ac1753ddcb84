package frag

import (
	"testing"
)

// onModel is a whole-card request naming the model.
func onModel(model string) Shape {
	s := wholeOf(1)
	s.UseType = model
	return s
}

// namedMix is 5 requests that may run anywhere, 2 naming MODEL-MANY and 1
// naming MODEL-FEW in every 8 (so every target is published after whole
// rounds).
func namedMix() []Shape {
	any := wholeOf(1)
	return []Shape{any, any, any, any, any, onModel("MODEL-MANY"), onModel("MODEL-MANY"), onModel("MODEL-FEW")}
}

// scarceCluster registers 16 cards of MODEL-MANY on eight nodes, 2 of
// MODEL-FEW and 2 of MODEL-NONE, which no request names.
func scarceCluster(w *Workload) {
	for _, n := range []string{"many-0", "many-1", "many-2", "many-3", "many-4", "many-5", "many-6", "many-7"} {
		w.RegisterSupply(n, map[string]Supply{"MODEL-MANY": {Cards: 2, MemMiB: 2 * 16384}})
	}
	w.RegisterSupply("none", map[string]Supply{"MODEL-NONE": {Cards: 2, MemMiB: 2 * 16384}})
	w.RegisterSupply("few", map[string]Supply{"MODEL-FEW": {Cards: 2, MemMiB: 2 * 16384}})
}

// TestPressure checks the pressures learned from a mix where twice as
// many requests name the abundant model as the scarce one: each model's
// named demand over its share of the cards, plus the prior (the named
// share of the demand spread evenly over the models, over each model's
// share of the cards).
func TestPressure(t *testing.T) {
	w := NewWorkload()
	scarceCluster(w)
	learn(t, w, "seen", MinRefresh, namedMix()...)
	// 3 of 8 requests name a model; 3 models.
	priorOf := func(cards, of float64) float64 { return prior * 3.0 / 8 / 3 * cards / of }
	target := w.Target()
	// 20 cards: MODEL-MANY has 16, MODEL-FEW and MODEL-NONE 2 each.
	want := map[string]float64{
		"MODEL-MANY": 2.0/8*20/16 + priorOf(20, 16),
		"MODEL-FEW":  1.0/8*20/2 + priorOf(20, 2),
		"MODEL-NONE": priorOf(20, 2),
	}
	for typ, wp := range want {
		if p := target.Pressure(typ); p < wp-1e-9 || p > wp+1e-9 {
			t.Errorf("pressure of %s = %.4f, want %.4f (all: %v)", typ, p, wp, target.press)
		}
	}
	if len(target.press) != len(want) || !target.Pressured() {
		t.Errorf("pressures = %v, want only %v", target.press, want)
	}

	// Two more MODEL-FEW cards lower its pressure from the next target on;
	// the same node registered again counts once.
	w.RegisterSupply("few-2", map[string]Supply{"MODEL-FEW": {Cards: 2, MemMiB: 2 * 16384}})
	w.RegisterSupply("few-2", map[string]Supply{"MODEL-FEW": {Cards: 2, MemMiB: 2 * 16384}})
	if n := w.total["MODEL-FEW"].Cards; n != 4 {
		t.Errorf("MODEL-FEW cards registered = %d, want 4", n)
	}
	gen := target.Gen()
	learn(t, w, "again", MinRefresh, namedMix()...)
	if w.Target().Gen() == gen {
		t.Fatal("the new cards published no new target")
	}
	// Published mid-round (every len(window)/8 requests by now): within 2%.
	if p, wp := w.Target().Pressure("MODEL-FEW"), 1.0/8*22/4+priorOf(22, 4); p < 0.98*wp || p > 1.02*wp {
		t.Errorf("pressure of MODEL-FEW with 4 cards = %.4f, want %.4f", p, wp)
	}
	// A node whose cards change model moves its cards.
	w.RegisterSupply("few-2", map[string]Supply{"MODEL-NONE": {Cards: 2, MemMiB: 2 * 16384}})
	if few, none := w.total["MODEL-FEW"].Cards, w.total["MODEL-NONE"].Cards; few != 2 || none != 4 {
		t.Errorf("cards registered after few-2 became MODEL-NONE: MODEL-FEW %d, MODEL-NONE %d; want 2 and 4", few, none)
	}
}

// TestPressureFollowsNamedDemand checks that the pressures follow the
// named demand even when the mix of request shapes holds still: a model
// named by 4% of the requests moves no target by driftLimit, but on 2 of
// 20 cards its pressure is 0.4.
func TestPressureFollowsNamedDemand(t *testing.T) {
	w := NewWorkload()
	scarceCluster(w)
	learn(t, w, "seen", MinRefresh, wholeOf(1))
	if press := w.Target().press; press != nil {
		t.Fatalf("pressures before any request names a model = %v, want none", press)
	}
	mix := make([]Shape, 25)
	for i := range mix {
		mix[i] = wholeOf(1)
	}
	mix[0] = onModel("MODEL-FEW")
	learn(t, w, "later", Window/len(mix)+1, mix...)
	if p := w.Target().Pressure("MODEL-FEW"); p < 0.3 {
		t.Errorf("pressure of MODEL-FEW = %.4f once 4%% of the requests name it, want about 0.4", p)
	}
}

// TestPressureWithoutNamedModels checks that without requests naming a
// model there are no pressures (not even the prior) and a new node
// publishes no new target: the policy is as without scarcity.
func TestPressureWithoutNamedModels(t *testing.T) {
	w := NewWorkload()
	scarceCluster(w)
	learn(t, w, "seen", MinRefresh, wholeOf(1), shareOf(30))
	if press := w.Target().press; press != nil || w.Target().Pressured() {
		t.Errorf("pressures = %v, want none", press)
	}
	gen := w.Target().Gen()
	w.RegisterSupply("few-2", map[string]Supply{"MODEL-FEW": {Cards: 2, MemMiB: 2 * 16384}})
	if g := w.Target().Gen(); g != gen {
		t.Errorf("generation moved from %d to %d on a new node without pressures", gen, g)
	}
}

// TestScarcityCost checks the cost of a placement: the share taken times
// the model's pressure, weighted, and nothing on a model without pressure.
func TestScarcityCost(t *testing.T) {
	tgt := &Target{press: map[string]float64{"MODEL-FEW": 2}}
	few := &Card{Type: "MODEL-FEW", MemMiB: 16384, Cores: 100, Count: 10, Shareable: true}
	many := &Card{Type: "MODEL-MANY", MemMiB: 16384, Cores: 100, Count: 10, Shareable: true}
	var s Scarcity
	s.Add(tgt, few, &usage{}, &usage{UsedMiB: 8192, UsedCores: 50, UsedNum: 1})
	s.Add(tgt, many, &usage{}, &usage{UsedMiB: 16384, UsedCores: 100, UsedNum: 1})
	if got, want := s.Cost(), scarcityWeight*2*500.0; got != want {
		t.Errorf("cost = %v, want %v (half a MODEL-FEW card at pressure 2)", got, want)
	}
}
