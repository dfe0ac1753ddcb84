package vgpu

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// typedNode is node name with n 16 GiB cards of the model typ.
func typedNode(name, typ string, n int) *v1.Node {
	cards := make([]card, n)
	for i := range cards {
		cards[i] = gpu(name+"-GPU-"+strconv.Itoa(i), 16384).withType(typ)
	}
	return testkit.Node(name, vgpuproto.AnnotationRegister, register(cards...),
		vgpuproto.AnnotationHandshake, "Reported 2026-01-01")
}

// onModel is whole(name, 1) restricted to the model.
func onModel(model string) func(string) *v1.Pod {
	return func(n string) *v1.Pod {
		p := whole(n, 1)
		p.Annotations[vgpuproto.AnnotationUseType] = model
		return p
	}
}

// scarceCluster registers 16 cards of MODEL-MANY on eight nodes, 2 of
// MODEL-FEW and 2 of MODEL-NONE, which no pod names, and returns a
// MODEL-MANY and a MODEL-FEW node, both empty.
func scarceCluster(t *testing.T, b *Backend) (many, few *Devices) {
	t.Helper()
	for i := 0; i < 8; i++ {
		d := devicesOf(t, b, typedNode("many-"+strconv.Itoa(i), "MODEL-MANY", 2))
		if i == 0 {
			many = d
		}
	}
	devicesOf(t, b, typedNode("none", "MODEL-NONE", 2))
	return many, devicesOf(t, b, typedNode("few", "MODEL-FEW", 2))
}

// namedMix is 5 pods that may run anywhere, 2 naming MODEL-MANY and 1
// naming MODEL-FEW in every 8 (so every target is published after whole
// rounds).
func namedMix() []func(string) *v1.Pod {
	any := func(n string) *v1.Pod { return whole(n, 1) }
	return []func(string) *v1.Pod{any, any, any, any, any, onModel("MODEL-MANY"), onModel("MODEL-MANY"), onModel("MODEL-FEW")}
}

// TestScarcityPressure checks the pressures learned from a mix where twice
// as many pods name the abundant model as the scarce one: each model's
// named demand over its share of the cards, plus the prior (the named
// share of the demand spread evenly over the models, over each model's
// share of the cards).
func TestScarcityPressure(t *testing.T) {
	b := newBackend(t)
	scarceCluster(t, b)
	learn(t, b, fragMinRefresh, namedMix()...)
	// 3 of 8 pods name a model; 3 models.
	prior := func(cards, of float64) float64 { return fragPrior * 3.0 / 8 / 3 * cards / of }
	press := b.frag.target.Load().press
	// 20 cards: MODEL-MANY has 16, MODEL-FEW and MODEL-NONE 2 each.
	want := map[string]float64{
		"MODEL-MANY": 2.0/8*20/16 + prior(20, 16),
		"MODEL-FEW":  1.0/8*20/2 + prior(20, 2),
		"MODEL-NONE": prior(20, 2),
	}
	for typ, w := range want {
		if p := press[typ]; p < w-1e-9 || p > w+1e-9 {
			t.Errorf("pressure of %s = %.4f, want %.4f (all: %v)", typ, p, w, press)
		}
	}
	if len(press) != len(want) {
		t.Errorf("pressures = %v, want only %v", press, want)
	}

	// Two more MODEL-FEW cards lower its pressure from the next target on;
	// the same node decoded again counts once.
	devicesOf(t, b, typedNode("few-2", "MODEL-FEW", 2))
	devicesOf(t, b, typedNode("few-2", "MODEL-FEW", 2))
	if n := b.frag.total["MODEL-FEW"].cards; n != 4 {
		t.Errorf("MODEL-FEW cards registered = %d, want 4", n)
	}
	gen := b.WorkloadGeneration()
	mix := namedMix()
	for i := 0; i < fragMinRefresh; i++ {
		for k, s := range mix {
			b.ObserveRequest(s("again-" + strconv.Itoa(k) + "-" + strconv.Itoa(i)))
		}
	}
	if b.WorkloadGeneration() == gen {
		t.Fatal("the new cards published no new target")
	}
	// Published mid-round (every len(window)/8 requests by now): within 2%.
	if p, w := b.frag.target.Load().press["MODEL-FEW"], 1.0/8*22/4+prior(22, 4); p < 0.98*w || p > 1.02*w {
		t.Errorf("pressure of MODEL-FEW with 4 cards = %.4f, want %.4f", p, w)
	}
	// A node whose cards change model moves its cards.
	devicesOf(t, b, typedNode("few-2", "MODEL-NONE", 2))
	if few, none := b.frag.total["MODEL-FEW"].cards, b.frag.total["MODEL-NONE"].cards; few != 2 || none != 4 {
		t.Errorf("cards registered after few-2 became MODEL-NONE: MODEL-FEW %d, MODEL-NONE %d; want 2 and 4", few, none)
	}
}

// TestScarcityFollowsNamedDemand checks that the pressures follow the
// named demand even when the mix of request shapes holds still: a model
// named by 4% of the pods moves no target by fragDrift, but on 2 of 20
// cards its pressure is 0.4.
func TestScarcityFollowsNamedDemand(t *testing.T) {
	b := newBackend(t)
	scarceCluster(t, b)
	learn(t, b, fragMinRefresh, func(n string) *v1.Pod { return whole(n, 1) })
	if press := b.frag.target.Load().press; press != nil {
		t.Fatalf("pressures before any pod names a model = %v, want none", press)
	}
	for i := 0; i < fragWindow; i++ {
		p := whole("later-"+strconv.Itoa(i), 1)
		if i%25 == 0 {
			p = onModel("MODEL-FEW")("later-" + strconv.Itoa(i))
		}
		b.ObserveRequest(p)
	}
	if p := b.frag.target.Load().press["MODEL-FEW"]; p < 0.3 {
		t.Errorf("pressure of MODEL-FEW = %.4f once 4%% of the pods name it, want about 0.4", p)
	}
}

// TestScarcityKeepsScarceModel checks that a pod that may run anywhere
// goes to the abundant model's cards rather than the scarce model's, which
// the pods naming it need. FGD's measure alone prefers the scarce model:
// the pods naming the abundant one are more, so its free cards count as
// less fragmented.
func TestScarcityKeepsScarceModel(t *testing.T) {
	b := newBackend(t)
	many, few := scarceCluster(t, b)
	learn(t, b, fragMinRefresh, namedMix()...)
	pod := whole("p", 1)
	sMany, sFew := many.ScoreNode(pod, PolicyFragment), few.ScoreNode(pod, PolicyFragment)
	if sMany <= sFew {
		t.Errorf("ScoreNode of an unrestricted pod = %.4f on MODEL-MANY, %.4f on MODEL-FEW; want MODEL-MANY higher", sMany, sFew)
	}
}

// TestScarcityWithoutNamedModels checks that without pods naming a model
// there are no pressures (not even the prior) and a new node publishes no
// new target: the policy is as without scarcity.
func TestScarcityWithoutNamedModels(t *testing.T) {
	b := newBackend(t)
	scarceCluster(t, b)
	learn(t, b, fragMinRefresh, func(n string) *v1.Pod { return whole(n, 1) }, func(n string) *v1.Pod { return share(n, 30) })
	if press := b.frag.target.Load().press; press != nil {
		t.Errorf("pressures = %v, want none", press)
	}
	gen := b.WorkloadGeneration()
	devicesOf(t, b, typedNode("few-2", "MODEL-FEW", 2))
	if g := b.WorkloadGeneration(); g != gen {
		t.Errorf("generation moved from %d to %d on a new node without pressures", gen, g)
	}
}
