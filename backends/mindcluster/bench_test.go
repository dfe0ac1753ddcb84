package mindcluster

import (
	"strconv"
	"testing"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// benchNodes builds n nodes of 8 chips, every other chip holding a vNPU.
func benchNodes(b *testing.B, be *Backend, n int) map[string]device.Devices {
	b.Helper()
	out := make(map[string]device.Devices, n)
	for i := range n {
		name := "n" + strconv.Itoa(i)
		d := newDevicesFor(b, be, node310P(name, 8, chips(0, 1, 2, 3, 4, 5, 6, 7)))
		for c := 0; c < 8; c += 2 {
			p := placed(corePod(name+"-"+strconv.Itoa(c), 2), strconv.Itoa(c)+"-vir02_1c", true)
			if err := d.AddResource(p); err != nil {
				b.Fatal(err)
			}
		}
		out[name] = d
	}
	return out
}

func BenchmarkFilterNode(b *testing.B) {
	d := benchNodes(b, newBackend(b, Options{}), 1)["n0"]
	pod := corePod("p", 4, mindclusterproto.LabelVNPULevel, "high")
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if st := d.FilterNode(pod, device.PolicyBinpack); !st.IsSuccess() {
			b.Fatal(st.Reasons)
		}
	}
}

func BenchmarkBatchScore1024(b *testing.B) {
	be := newBackend(b, Options{})
	nodes := benchNodes(b, be, 1024)
	pod := corePod("p", 1)
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if len(be.BatchScore(pod, device.PolicyBinpack, nodes)) != len(nodes) {
			b.Fatal("a node was not scored")
		}
	}
}
