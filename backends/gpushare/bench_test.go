package gpushare

import (
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// benchDevices is an 8-card node with a few pods placed, in the given mode.
func benchDevices(b *testing.B, mode Mode) *Devices {
	b.Helper()
	return devicesOf(b, newBackend(b, mode), gpuNode("8", "131072", gpushareproto.AnnotationUnhealthyIDs, "7"),
		placed(sharePod("s1", 8192), "0"), placed(sharePod("s2", 4096), "0"),
		placed(sharePod("s3", 12000), "1"), placed(numberPod("n1", 2), "2,3"))
}

func benchPod(mode Mode, fits bool) *v1.Pod {
	switch {
	case mode == ModeShare && fits:
		return sharePod("p", 2048, 1024)
	case mode == ModeShare:
		return sharePod("p", 16000, 1000)
	case fits:
		return numberPod("p", 2)
	default:
		return numberPod("p", 4)
	}
}

func BenchmarkFilterNode(b *testing.B) {
	for _, mode := range []Mode{ModeShare, ModeNumber} {
		for _, fits := range []bool{true, false} {
			name := string(mode) + "/fits"
			if !fits {
				name = string(mode) + "/refused"
			}
			b.Run(name, func(b *testing.B) {
				d, pod := benchDevices(b, mode), benchPod(mode, fits)
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if d.FilterNode(pod, device.PolicyBinpack).IsSuccess() != fits {
						b.Fatal("unexpected filter result")
					}
				}
			})
		}
	}
}

func BenchmarkScoreNode(b *testing.B) {
	for _, mode := range []Mode{ModeShare, ModeNumber} {
		b.Run(string(mode), func(b *testing.B) {
			d, pod := benchDevices(b, mode), benchPod(mode, true)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if d.ScoreNode(pod, device.PolicySpread) <= 0 {
					b.Fatal("unexpected score")
				}
			}
		})
	}
}

func BenchmarkAllocateRelease(b *testing.B) {
	for _, mode := range []Mode{ModeShare, ModeNumber} {
		b.Run(string(mode), func(b *testing.B) {
			d, pod := benchDevices(b, mode), benchPod(mode, true)
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
		})
	}
}

func BenchmarkDeepCopy(b *testing.B) {
	d := benchDevices(b, ModeShare)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_ = d.DeepCopy()
	}
}
