package vgpu

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/backends/vgpu/frag"
	"github.com/vgpushare/vshare/device"
)

// share is a pod asking for pct percent of one card's memory and cores.
func share(name string, pct int64) *v1.Pod {
	return vpod(name, []ctr{{n: 1, mem: -1, pct: pct, cores: pct}})
}

// whole is a pod asking for n unused cards.
func whole(name string, n int64) *v1.Pod {
	return vpod(name, []ctr{{n: n, mem: -1, pct: 100, cores: 100}})
}

// withCPU sets the pod's CPU request in milli-cores.
func withCPU(p *v1.Pod, milli int64) *v1.Pod {
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: *resource.NewMilliQuantity(milli, resource.DecimalSI)}
	return p
}

// withMemory sets the pod's memory request in MiB.
func withMemory(p *v1.Pod, mib int64) *v1.Pod {
	p.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceMemory: *resource.NewQuantity(mib<<20, resource.BinarySI)}
	return p
}

// learn feeds the backend n copies of each pod shape, in rounds, so that
// the learned mix is published.
func learn(t *testing.T, b *Backend, n int, shapes ...func(name string) *v1.Pod) {
	t.Helper()
	for i := 0; i < n; i++ {
		for k, s := range shapes {
			b.ObserveRequest(s("seen-" + strconv.Itoa(k) + "-" + strconv.Itoa(i)))
		}
	}
	if b.WorkloadGeneration() == 0 {
		t.Fatal("no workload published")
	}
}

// fragNodeWith returns the node's devices after placing the pods under binpack.
func fragNodeWith(t *testing.T, b *Backend, node *v1.Node, pods ...*v1.Pod) *Devices {
	t.Helper()
	d := devicesOf(t, b, node)
	for _, p := range pods {
		allocated(t, d, p, "binpack")
	}
	return d
}

func twoCards() *v1.Node {
	return vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384)})
}

// TestObserveRequest checks what the backend feeds the learned workload
// (frag.Workload, whose learning frag's tests check): a pod seen again
// counts once, pods without vGPUs are left out, and an unchanged mix keeps
// its generation.
func TestObserveRequest(t *testing.T) {
	b := newBackend(t)
	if g := b.WorkloadGeneration(); g != 0 {
		t.Fatalf("generation before any request = %d, want 0", g)
	}
	p := share("p", 50)
	for i := 0; i < 2*frag.MinRefresh; i++ {
		b.ObserveRequest(p) // the same pod counts once
	}
	for i := 0; i < 2*frag.MinRefresh; i++ {
		b.ObserveRequest(vpod("cpu-only-"+strconv.Itoa(i), nil))
	}
	if g := b.WorkloadGeneration(); g != 0 {
		t.Errorf("generation after one pod seen many times and pods without vGPUs = %d, want 0", g)
	}
	learn(t, b, frag.MinRefresh, func(n string) *v1.Pod { return share(n, 50) })
	gen := b.WorkloadGeneration()
	learn(t, b, 4*frag.MinRefresh, func(n string) *v1.Pod { return share(n+"-again", 50) })
	if g := b.WorkloadGeneration(); g != gen {
		t.Errorf("generation moved from %d to %d though the mix did not change", gen, g)
	}
	learn(t, b, frag.Window, func(n string) *v1.Pod { return whole(n, 2) })
	if g := b.WorkloadGeneration(); g == gen {
		t.Errorf("generation stayed %d though the mix changed", g)
	}
}

func TestFragmentScore(t *testing.T) {
	tests := []struct {
		name string
		// mix is the workload the backend has seen.
		mix []func(string) *v1.Pod
		// better and worse are the nodes the pod should and should not
		// prefer, with their free CPU and memory (CPU 0: not set).
		better, worse       func(*Backend) *Devices
		betterCPU, worseCPU int64
		betterMem, worseMem int64
		pod                 *v1.Pod
	}{{
		name:   "a share fills the card it fits exactly",
		mix:    []func(string) *v1.Pod{func(n string) *v1.Pod { return share(n, 50) }},
		better: func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards(), share("a", 50)) },
		worse:  func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards()) },
		pod:    share("p", 50),
	}, {
		name: "a whole card keeps a pair free for the two-card requests",
		mix: []func(string) *v1.Pod{
			func(n string) *v1.Pod { return whole(n, 2) }, func(n string) *v1.Pod { return whole(n, 1) }},
		better: func(b *Backend) *Devices {
			return fragNodeWith(t, b, vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384), gpu("GPU-2", 16384)}))
		},
		worse: func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards()) },
		pod:   whole("p", 1),
	}, {
		name:   "a card is not taken where the pod's CPU strands the rest",
		mix:    []func(string) *v1.Pod{func(n string) *v1.Pod { return withCPU(whole(n, 1), 8000) }},
		better: func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards()) },
		worse:  func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards()) },
		// Both nodes have two free cards; only the worse one runs out
		// of CPU for the second card's pods.
		betterCPU: 64000, worseCPU: 12000,
		pod: withCPU(whole("p", 1), 8000),
	}, {
		name:   "a card is not taken where the pod's memory strands the rest",
		mix:    []func(string) *v1.Pod{func(n string) *v1.Pod { return withMemory(whole(n, 1), 65536) }},
		better: func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards()) },
		worse:  func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards()) },
		// Both nodes have two free cards and plenty of CPU; only the
		// worse one runs out of memory for the second card's pods.
		betterCPU: 64000, worseCPU: 64000, betterMem: 262144, worseMem: 100000,
		pod: withMemory(whole("p", 1), 65536),
	}, {
		name:      "a pod without vGPUs goes where it strands no card",
		mix:       []func(string) *v1.Pod{func(n string) *v1.Pod { return withCPU(whole(n, 1), 8000) }},
		better:    func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards(), whole("a", 2)) },
		worse:     func(b *Backend) *Devices { return fragNodeWith(t, b, twoCards()) },
		betterCPU: 12000, worseCPU: 12000,
		pod: withCPU(vpod("cpu", []ctr{{n: -1, mem: -1, pct: -1, cores: -1}}), 8000),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t)
			learn(t, b, frag.MinRefresh, tc.mix...)
			better, worse := tc.better(b), tc.worse(b)
			var hb, hw device.Host
			if tc.betterCPU > 0 {
				hb = device.Host{CPUMilli: tc.betterCPU, MemMiB: cmp.Or(tc.betterMem, 1<<20), Known: true}
				hw = device.Host{CPUMilli: tc.worseCPU, MemMiB: cmp.Or(tc.worseMem, 1<<20), Known: true}
			}
			sb, sw := better.scoreOn(tc.pod, PolicyFragment, hb), worse.scoreOn(tc.pod, PolicyFragment, hw)
			if sb <= sw || sb > 100 || sw < 0 {
				t.Errorf("ScoreNode = %.4f on the better node, %.4f on the worse, want better > worse, in [0, 100]", sb, sw)
			}
		})
	}
}

// TestFragmentCardChoice checks that Allocate takes the card ScoreNode
// measured: the fullest after placement, ties by the fragmentation left.
func TestFragmentCardChoice(t *testing.T) {
	b := newBackend(t)
	learn(t, b, frag.MinRefresh, func(n string) *v1.Pod { return share(n, 40) }, func(n string) *v1.Pod { return share(n, 60) })
	node := vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384), gpu("GPU-2", 16384)})
	d := fragNodeWith(t, b, node, share("a", 30), share("b", 60))
	if ids := allocated(t, d, share("p", 40), PolicyFragment); ids != "GPU-1,NVIDIA,6553,40:" {
		t.Errorf("40%% share took %q, want the 60%%-used card GPU-1", ids)
	}
	if st := d.FilterNode(share("q", 40), PolicyFragment); !st.IsSuccess() {
		t.Errorf("FilterNode under fragment: %v", st.Message())
	}
}

// TestFragmentUnlearned checks that before any request is seen the policy
// still scores (by packing), and that an empty mix never panics.
func TestFragmentUnlearned(t *testing.T) {
	b := newBackend(t)
	full := fragNodeWith(t, b, twoCards(), share("a", 50))
	empty := fragNodeWith(t, b, twoCards())
	if sf, se := full.ScoreNode(share("p", 50), PolicyFragment), empty.ScoreNode(share("p", 50), PolicyFragment); sf <= se {
		t.Errorf("ScoreNode = %.3f on the half-used node, %.3f on the empty one, want the half-used higher", sf, se)
	}
}

// fragBenchNode is a half-used 8-card node whose backend learned a
// 40-class mix, and a 30% share to place on it.
func fragBenchNode(b *testing.B) (*Devices, *v1.Pod) {
	be := newBackend(b)
	for i := 0; i < frag.Window; i++ {
		pct := int64(5 + 5*(i%19))
		if i%10 == 0 {
			pct = 100
		}
		be.ObserveRequest(withCPU(share("seen-"+strconv.Itoa(i), pct), int64(1000*(1+i%2))))
	}
	var cards []card
	for i := 0; i < 8; i++ {
		cards = append(cards, gpu("GPU-"+strconv.Itoa(i), 16384))
	}
	d := devicesOf(b, be, vgpuNode(cards))
	for i := 0; i < 4; i++ {
		if _, err := d.Allocate(share("a"+strconv.Itoa(i), int64(20+15*i)), "binpack"); err != nil {
			b.Fatal(err)
		}
	}
	return d, withCPU(share("p", 30), 4000)
}

// BenchmarkScoreNodeFragment scores a half-used 8-card node under the
// fragment policy with a 40-class learned mix, against binpack, with the
// node's free CPU fixed and changing every call (nothing is kept between
// calls: the two cost the same).
func BenchmarkScoreNodeFragment(b *testing.B) {
	d, pod := fragBenchNode(b)
	host := device.Host{CPUMilli: 64000, MemMiB: 1 << 20, Known: true}
	for _, policy := range []string{"binpack", PolicyFragment} {
		b.Run(policy, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				d.scoreOn(pod, policy, host)
			}
		})
	}
	b.Run("fragment-uncached", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d.scoreOn(pod, PolicyFragment, device.Host{CPUMilli: int64(64000 + i%1000), MemMiB: 1 << 20, Known: true})
		}
	})
}

// BenchmarkFilterNodeFragment is BenchmarkScoreNodeFragment's node
// filtered under the fragment policy, with the node's free CPU fixed and
// changing every call: the cards are chosen, the fragmentation ranking the
// tied cards, on every call.
func BenchmarkFilterNodeFragment(b *testing.B) {
	d, pod := fragBenchNode(b)
	host := device.Host{CPUMilli: 64000, MemMiB: 1 << 20, Known: true}
	b.Run("fragment", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !d.filterOn(pod, PolicyFragment, host).IsSuccess() {
				b.Fatal("does not fit")
			}
		}
	})
	b.Run("fragment-uncached", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if !d.filterOn(pod, PolicyFragment, device.Host{CPUMilli: int64(64000 + i%1000), MemMiB: 1 << 20, Known: true}).IsSuccess() {
				b.Fatal("does not fit")
			}
		}
	})
}

// TestFragmentMeasureNeverStale drives one node through a random sequence
// of host changes, newly learned workloads, allocations and releases, and
// checks after each step that Fit under the fragment policy, which keeps
// the node's measure of its cards until they or the learned target change
// (fragNow), answers exactly what a copy of the node, which measures from
// scratch, answers; and that the kept measure is used.
func TestFragmentMeasureNeverStale(t *testing.T) {
	b := newBackend(t)
	learn(t, b, frag.MinRefresh, func(n string) *v1.Pod { return share(n, 40) }, func(n string) *v1.Pod { return whole(n, 1) })
	d := devicesOf(t, b, fourCards())
	rng := rand.New(rand.NewPCG(7, 11))
	shapes := []*v1.Pod{
		share("s25", 25), share("s50", 50), withCPU(share("s40cpu", 40), 6000),
		whole("w1", 1), whole("w2", 2), withMemory(whole("w1mem", 1), 40000),
		one("m2", 2, 3000, 20), one("m1", 1, 9000, 0),
		withCPU(vpod("cpu", []ctr{{n: -1, mem: -1, pct: -1, cores: -1}}), 8000),
	}
	type held struct {
		pod *v1.Pod
		res *device.Reservation
	}
	var running []held
	var host device.Host
	kept := 0
	for step := 0; step < 600; step++ {
		switch op := rng.IntN(10); {
		case op == 0:
			host = device.Host{CPUMilli: rng.Int64N(32000), MemMiB: rng.Int64N(200000), Known: true}
		case op == 1:
			pct := int64(10 * (1 + rng.IntN(9)))
			for i := 0; i < frag.MinRefresh; i++ {
				b.ObserveRequest(share(fmt.Sprintf("seen-%d-%d", step, i), pct))
			}
		case op <= 3:
			p := shapes[rng.IntN(len(shapes)-1)].DeepCopy()
			p.Name, p.UID = fmt.Sprintf("run-%d", step), types.UID(fmt.Sprintf("uid-run-%d", step))
			if d.filterOn(p, PolicyFragment, host).IsSuccess() {
				r, err := d.allocateOn(p, PolicyFragment, host)
				if err != nil {
					t.Fatalf("step %d: Allocate(%s) after Fit succeeded: %v", step, p.Name, err)
				}
				running = append(running, held{p, r})
			}
		case op == 4 && len(running) > 0:
			k := rng.IntN(len(running))
			if err := d.Release(running[k].pod, running[k].res); err != nil {
				t.Fatalf("step %d: Release: %v", step, err)
			}
			running = slices.Delete(running, k, k+1)
		}
		for _, p := range shapes {
			prep, err := b.Prepare(p, PolicyFragment)
			if err != nil {
				t.Fatal(err)
			}
			fresh := d.DeepCopy().(*Devices)
			wantScore, wantSt := fresh.Fit(p, prep, host)
			if m := d.now.Load(); m != nil && m.Target() == b.workload.Target() {
				kept++
			}
			gotScore, gotSt := d.Fit(p, prep, host)
			if gotScore != wantScore || gotSt.IsSuccess() != wantSt.IsSuccess() || gotSt.Message() != wantSt.Message() {
				t.Fatalf("step %d, %s: Fit = %v %q, from scratch %v %q", step, p.Name, gotScore, gotSt.Message(), wantScore, wantSt.Message())
			}
		}
	}
	// The kept measure must actually be used, or this test checks nothing.
	if kept < 1000 {
		t.Errorf("the kept measure answered %d times in 600 steps of 9 shapes, want most", kept)
	}
}
