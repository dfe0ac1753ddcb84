package registrar_test

import (
	"context"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/nodeagent/registrar"
	"github.com/vgpushare/vshare/protocol/ascendproto"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

const (
	keyRegister  = "example.com/register"
	keyHandshake = "example.com/handshake"
)

// patcher records the annotation keys of each patch.
type patcher struct{ keys [][]string }

func (p *patcher) PatchNodeAnnotations(_ context.Context, _ string, ann map[string]string) error {
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	p.keys = append(p.keys, keys)
	return nil
}

// TestHandshakePolicies walks both policies through the same node history:
// the first report, a quiet node, and a scheduler asking for a report.
func TestHandshakePolicies(t *testing.T) {
	type step struct {
		name        string
		after       time.Duration
		handshake   string // the node's handshake value
		wantWait    time.Duration
		wantPatches [][]string
	}
	first := [][]string{{keyHandshake, keyRegister}}
	tests := []struct {
		policy registrar.Handshake
		steps  []step
	}{{
		policy: registrar.Answer,
		steps: []step{
			{name: "first report", wantPatches: first},
			{name: "quiet node", after: 10 * time.Second, handshake: "Reported_2026.01.02 03:04:05"},
			{name: "request answered no sooner than the interval", after: 10 * time.Second, handshake: "Requesting_2026.01.02 03:04:25",
				wantWait: 10 * time.Second},
			{name: "request answered", after: 10 * time.Second, handshake: "Requesting_2026.01.02 03:04:25",
				wantPatches: [][]string{{keyHandshake}}},
		},
	}, {
		policy: registrar.Renew,
		steps: []step{
			{name: "first report", wantWait: 30 * time.Second, wantPatches: first},
			{name: "quiet node", after: 10 * time.Second, handshake: "Reported_2026.01.02 03:04:05", wantWait: 20 * time.Second},
			{name: "request answered at once", after: 10 * time.Second, handshake: "Requesting_2026.01.02 03:04:25",
				wantWait: 30 * time.Second, wantPatches: [][]string{{keyHandshake}}},
			{name: "renewal", after: 30 * time.Second, handshake: "Reported_2026.01.02 03:04:25",
				wantWait: 30 * time.Second, wantPatches: [][]string{{keyHandshake}}},
		},
	}}
	for _, tc := range tests {
		t.Run(map[registrar.Handshake]string{registrar.Answer: "answer", registrar.Renew: "renew"}[tc.policy], func(t *testing.T) {
			clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			p := &patcher{}
			reg, err := registrar.New(registrar.Options{Node: "n1", What: "test", HandshakeKey: keyHandshake, Handshake: tc.policy,
				Desired: func() map[string]string { return map[string]string{keyRegister: "v"} }, Patcher: p, Clock: clk})
			if err != nil {
				t.Fatal(err)
			}
			if wait, err := reg.Sync(context.Background()); wait != 0 || err != nil || len(p.keys) != 0 {
				t.Fatalf("Sync before the node was observed = %s, %v, patches %v; want nothing", wait, err, p.keys)
			}
			for i, s := range tc.steps {
				clk.Step(s.after)
				ann := map[string]string{}
				if i > 0 {
					ann[keyRegister], ann[keyHandshake] = "v", s.handshake
				}
				reg.ObserveNode(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: strconv.Itoa(i + 1), Annotations: ann}})
				p.keys = nil
				wait, err := reg.Sync(context.Background())
				if err != nil {
					t.Fatalf("%s: %v", s.name, err)
				}
				if wait != s.wantWait {
					t.Errorf("%s: wait %s, want %s", s.name, wait, s.wantWait)
				}
				if diff := cmp.Diff(s.wantPatches, p.keys); diff != "" {
					t.Errorf("%s: patches (-want +got):\n%s", s.name, diff)
				}
			}
		})
	}
}

func TestNewValidates(t *testing.T) {
	ok := registrar.Options{Node: "n1", HandshakeKey: keyHandshake, Desired: func() map[string]string { return nil }, Patcher: &patcher{}}
	for name, edit := range map[string]func(*registrar.Options){
		"no node":             func(o *registrar.Options) { o.Node = "" },
		"no handshake key":    func(o *registrar.Options) { o.HandshakeKey = "" },
		"interval too long":   func(o *registrar.Options) { o.HandshakeInterval = time.Minute },
		"negative interval":   func(o *registrar.Options) { o.HandshakeInterval = -time.Second },
		"no desired function": func(o *registrar.Options) { o.Desired = nil },
	} {
		o := ok
		edit(&o)
		if _, err := registrar.New(o); err == nil {
			t.Errorf("%s: New accepted the options", name)
		}
	}
	if _, err := registrar.New(ok); err != nil {
		t.Errorf("New(valid options) = %v", err)
	}
}

// The registrar writes both agents' handshakes with protocol/vgpuproto's values;
// HAMi's Ascend protocol must use the same ones.
func TestHandshakeValuesAgree(t *testing.T) {
	if vgpuproto.HandshakeReported != ascendproto.HandshakeReported || vgpuproto.HandshakeLayout != ascendproto.HandshakeLayout {
		t.Errorf("handshake values differ: protocol/vgpuproto %q %q, protocol/ascendproto %q %q",
			vgpuproto.HandshakeReported, vgpuproto.HandshakeLayout, ascendproto.HandshakeReported, ascendproto.HandshakeLayout)
	}
}
