package ascend

import (
	"fmt"
	"testing"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/device"
)

// benchDevices is an 8-card 910B3 node half filled with templates.
func benchDevices(b *testing.B) *Devices {
	var cards []card
	for i := 0; i < 8; i++ {
		cards = append(cards, npu(fmt.Sprintf("NPU-%d", i), 65536).inNetwork(i/4))
	}
	d := devicesOf(b, newTestBackend(b, "Ascend910B3", false), ascendNode("n", "Ascend910B3", cards))
	for i := 0; i < 8; i++ {
		testkit.Allocate(b, d, npuPod(fmt.Sprintf("h%d", i), "Ascend910B3", []ctr{{n: 1, mem: 16384, cores: -1}}), device.PolicySpread)
	}
	return d
}

func BenchmarkFilterNode(b *testing.B) {
	d := benchDevices(b)
	pod := npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 20000, cores: -1}})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !d.FilterNode(pod, device.PolicyBinpack).IsSuccess() {
			b.Fatal("pod does not fit")
		}
	}
}

func BenchmarkScoreNodeMultiCardNetwork(b *testing.B) {
	d := benchDevices(b)
	pod := npuPod("p", "Ascend910B3", []ctr{{n: 2, mem: -1, cores: -1}})
	d.cards = make([]cardState, len(d.cards))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d.ScoreNode(pod, device.PolicyBinpack) <= 0 {
			b.Fatal("pod does not fit")
		}
	}
}

func BenchmarkAllocateRelease(b *testing.B) {
	d := benchDevices(b)
	pod := npuPod("p", "Ascend910B3", []ctr{{n: 1, mem: 20000, cores: -1}})
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := d.Allocate(pod, device.PolicyBinpack)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Release(pod, r); err != nil {
			b.Fatal(err)
		}
	}
}
