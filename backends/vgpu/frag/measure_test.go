package frag

import (
	"math/rand/v2"
	"testing"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/device"
)

type usage = cardledger.Usage

// bruteF is F by its definition: per class, the free milli of the cards
// it cannot use, or all free milli when too few cards fit it or the host
// lacks its CPU or memory.
func bruteF(tgt *Target, cards []Card, use []usage, h device.Host, used Use) float64 {
	var f float64
	for k := range tgt.classes {
		cl := &tgt.classes[k]
		var idle, usable float64
		var n int32
		for i := range cards {
			free := cards[i].Free(&use[i])
			idle += free
			if free > 0 && cl.fits(&cards[i], &use[i]) {
				n++
				usable += free
			}
		}
		if n < cl.Nums || !hostFits(&h, cl, used) {
			usable = 0
		}
		f += cl.weight * (idle - usable)
	}
	return f
}

// TestMeasure checks Value against F's definition, and ValueWith against
// a new measure with the one card changed, on random nodes.
func TestMeasure(t *testing.T) {
	w := NewWorkload()
	named := shareOf(25)
	named.UseType = "MODEL-B"
	hungry := wholeOf(1)
	hungry.CPU, hungry.HostMem = 8000, 32768
	learn(t, w, "seen", MinRefresh, shareOf(40), shareOf(25), wholeOf(1), wholeOf(2), named, hungry,
		Shape{Nums: 1, MemMiB: 6000, Cores: 0})
	tgt := w.Target()
	rng := rand.New(rand.NewPCG(3, 5))
	for round := 0; round < 200; round++ {
		n := 1 + rng.IntN(8)
		cards, use := make([]Card, n), make([]usage, n)
		for i := range cards {
			cards[i] = Card{Type: []string{"MODEL-A", "MODEL-B"}[rng.IntN(2)], MemMiB: 16384, Cores: 100, Count: 4,
				Shareable: rng.IntN(8) > 0}
			use[i] = usage{UsedMiB: rng.Int64N(16385), UsedCores: rng.Int32N(101), UsedNum: rng.Int32N(5)}
		}
		h := device.Host{CPUMilli: rng.Int64N(16000), MemMiB: rng.Int64N(65536), Known: rng.IntN(4) > 0}
		var m Measure
		m.Init(tgt, n)
		for i := range cards {
			m.Add(i, &cards[i], &use[i])
		}
		if got, want := m.Value(h, Use{}), bruteF(tgt, cards, use, h, Use{}); !near(got, want) {
			t.Fatalf("round %d: Value = %v, by definition %v", round, got, want)
		}
		i := rng.IntN(n)
		changed := use[i]
		changed.UsedMiB, changed.UsedCores, changed.UsedNum = min(changed.UsedMiB+4096, 16384), min(changed.UsedCores+25, 100), changed.UsedNum+1
		pod := Use{CPUMilli: 4000, MemMiB: 8192}
		got := m.ValueWith(i, &cards[i], &changed, h, pod)
		use[i] = changed
		if want := bruteF(tgt, cards, use, h, pod); !near(got, want) {
			t.Fatalf("round %d: ValueWith(card %d) = %v, by definition %v", round, i, got, want)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-6 && b-a < 1e-6 }

// TestScore checks the score's range and order: a larger fragmentation
// decrease wins across steps, packing only within one.
func TestScore(t *testing.T) {
	if s := Score(0, 1); s <= Score(0, 0) || s >= Score(100, 0) {
		t.Errorf("Score(0, 1) = %v: want above Score(0, 0) = %v and below Score(100, 0) = %v", s, Score(0, 0), Score(100, 0))
	}
	if lo, hi := Score(-1e9, 0), Score(1e9, 1); lo < 0 || hi > device.MaxScore {
		t.Errorf("Score range [%v, %v], want within [0, %d]", lo, hi, device.MaxScore)
	}
}
