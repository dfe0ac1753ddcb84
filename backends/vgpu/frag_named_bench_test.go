package vgpu

import (
	"strconv"
	"testing"

	"github.com/vgpushare/vshare/backends/vgpu/frag"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// BenchmarkScoreNodeFragmentNamed is BenchmarkScoreNodeFragment's
// from-scratch score with a third of the learned pods naming card models
// (use-gputype), so the scarcity cost (frag.Scarcity) is computed, and
// the decoding of a node, which registers its cards' models.
func BenchmarkScoreNodeFragmentNamed(b *testing.B) {
	be := newBackend(b)
	models := []string{"MODEL-A", "MODEL-B", "MODEL-C"}
	for i := 0; i < frag.Window; i++ {
		pct := int64(5 + 5*(i%19))
		if i%10 == 0 {
			pct = 100
		}
		p := withCPU(share("seen-"+strconv.Itoa(i), pct), int64(1000*(1+i%2)))
		if i%3 == 0 {
			p.Annotations[vgpuproto.AnnotationUseType] = models[i/3%len(models)]
		}
		be.ObserveRequest(p)
	}
	var cards []card
	for i := 0; i < 8; i++ {
		cards = append(cards, gpu("GPU-"+strconv.Itoa(i), 16384).withType("MODEL-A"))
	}
	node := vgpuNode(cards)
	d := devicesOf(b, be, node)
	for i := 0; i < 4; i++ {
		if _, err := d.Allocate(share("a"+strconv.Itoa(i), int64(20+15*i)), "binpack"); err != nil {
			b.Fatal(err)
		}
	}
	pod := withCPU(share("p", 30), 4000)
	b.Run("score-uncached", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			d.scoreOn(pod, PolicyFragment, device.Host{CPUMilli: int64(64000 + i%1000), MemMiB: 1 << 20, Known: true})
		}
	})
	b.Run("new-devices", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			if _, err := be.NewDevices(node); err != nil {
				b.Fatal(err)
			}
		}
	})
}
