package vgpu

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/backends/vgpu/frag"
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

// TestDecodedNodesRegisterSupply checks that every decoded node registers
// its cards by model for the pressures (frag.Workload.RegisterSupply, whose
// arithmetic frag's tests check): the model named on few cards weighs
// most, the model named on many cards and the model nobody names (the
// prior) weigh something; a node decoded again counts once, and more
// cards of a model lower its pressure.
func TestDecodedNodesRegisterSupply(t *testing.T) {
	b := newBackend(t)
	scarceCluster(t, b)
	learn(t, b, frag.MinRefresh, namedMix()...)
	tgt := b.workload.Target()
	many, few, none := tgt.Pressure("MODEL-MANY"), tgt.Pressure("MODEL-FEW"), tgt.Pressure("MODEL-NONE")
	if few <= many || few <= none || many <= 0 || none <= 0 {
		t.Fatalf("pressures MODEL-FEW %.4f, MODEL-MANY %.4f, MODEL-NONE %.4f: want MODEL-FEW highest, all above 0", few, many, none)
	}
	devicesOf(t, b, typedNode("few", "MODEL-FEW", 2))
	learn(t, b, frag.MinRefresh, namedMix()...)
	if p := b.workload.Target().Pressure("MODEL-FEW"); p != few {
		t.Errorf("pressure of MODEL-FEW after its node was decoded again = %.4f, want %.4f", p, few)
	}
	devicesOf(t, b, typedNode("few-2", "MODEL-FEW", 2))
	mix := namedMix()
	for i := 0; i < frag.MinRefresh; i++ {
		for k, s := range mix {
			b.ObserveRequest(s("again-" + strconv.Itoa(k) + "-" + strconv.Itoa(i)))
		}
	}
	if p := b.workload.Target().Pressure("MODEL-FEW"); p >= 0.75*few {
		t.Errorf("pressure of MODEL-FEW on twice the cards = %.4f, want about half of %.4f", p, few)
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
	learn(t, b, frag.MinRefresh, namedMix()...)
	pod := whole("p", 1)
	sMany, sFew := many.ScoreNode(pod, PolicyFragment), few.ScoreNode(pod, PolicyFragment)
	if sMany <= sFew {
		t.Errorf("ScoreNode of an unrestricted pod = %.4f on MODEL-MANY, %.4f on MODEL-FEW; want MODEL-MANY higher", sMany, sFew)
	}
}

// TestScarcityWithoutNamedModels checks that without pods naming a model
// there are no pressures: the policy is as without scarcity.
func TestScarcityWithoutNamedModels(t *testing.T) {
	b := newBackend(t)
	scarceCluster(t, b)
	learn(t, b, frag.MinRefresh, func(n string) *v1.Pod { return whole(n, 1) }, func(n string) *v1.Pod { return share(n, 30) })
	if b.workload.Target().Pressured() {
		t.Error("pressures without a pod naming a model, want none")
	}
}
