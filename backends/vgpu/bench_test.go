package vgpu

import (
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
)

// benchDevices is an 8-card node with a few pods placed.
func benchDevices(b *testing.B) *Devices {
	b.Helper()
	var cards []card
	for i := 0; i < 8; i++ {
		cards = append(cards, gpu("GPU-"+strconv.Itoa(i), 81920))
	}
	return devicesOf(b, newBackend(b), vgpuNode(cards),
		placed(one("a", 1, 8000, 20), "GPU-0,NVIDIA,8000,20:"), placed(one("b", 2, 4000, 10), "GPU-1,NVIDIA,4000,10:GPU-2,NVIDIA,4000,10:"))
}

func BenchmarkFilterNode(b *testing.B) {
	d := benchDevices(b)
	fit, misfit := one("p", 2, 6000, 30), one("q", 4, 81000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if !d.FilterNode(fit, device.PolicyBinpack).IsSuccess() {
			b.Fatal("does not fit")
		}
		_ = misfit
	}
}

// BenchmarkFit is the plugin's per-node call on a result-table miss: the
// request prepared once, then Fit (status and score from one choice of
// cards), fitting and not.
func BenchmarkFit(b *testing.B) {
	d := benchDevices(b)
	for name, pod := range map[string]*v1.Pod{"fit": one("p", 2, 6000, 30), "misfit": one("q", 8, 81000, 0)} {
		prep, err := d.b.Prepare(pod, device.PolicyBinpack)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				d.Fit(pod, prep, device.Host{})
			}
		})
	}
}

func BenchmarkFilterNodeMisfit(b *testing.B) {
	d := benchDevices(b)
	misfit := one("q", 8, 81000, 0)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if d.FilterNode(misfit, device.PolicyBinpack).IsSuccess() {
			b.Fatal("fits")
		}
	}
}

func BenchmarkScoreNode(b *testing.B) {
	d := benchDevices(b)
	p := one("p", 2, 6000, 30)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = d.ScoreNode(p, device.PolicySpread)
	}
}

func BenchmarkAllocateRelease(b *testing.B) {
	d := benchDevices(b)
	p := one("p", 2, 6000, 30)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, err := d.Allocate(p, device.PolicyBinpack)
		if err != nil {
			b.Fatal(err)
		}
		if err := d.Release(p, r); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDeepCopy(b *testing.B) {
	d := benchDevices(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = d.DeepCopy()
	}
}
