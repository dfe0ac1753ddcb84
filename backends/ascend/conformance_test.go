package ascend

import (
	"math/rand/v2"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/conformance"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// conformanceCards mixes sizes and states: full 910B3 cards, one shared by
// at most two vNPUs and an unhealthy one.
func conformanceCards() []card {
	return []card{npu("NPU-0", 65536), npu("NPU-1", 65536), npu("NPU-2", 65536).withCount(2), npu("NPU-3", 65536).unhealthy()}
}

// templatePod asks for one or two containers of template-sized memory,
// whole cards or two whole cards.
func templatePod(rng *rand.Rand) *v1.Pod {
	var ctrs []ctr
	for i := 0; i < 1+rng.IntN(2); i++ {
		switch rng.IntN(6) {
		case 0:
			ctrs = append(ctrs, ctr{n: 1, mem: -1, cores: -1})
		case 1:
			ctrs = append(ctrs, ctr{n: 2, mem: -1, cores: -1})
		default:
			ctrs = append(ctrs, ctr{n: 1, mem: 4096 * (1 + rng.Int64N(8)), cores: -1})
		}
	}
	return npuPod("p", "Ascend910B3", ctrs)
}

// softPod asks for memory and core percentages (hami-core).
func softPod(rng *rand.Rand) *v1.Pod {
	var ctrs []ctr
	for i := 0; i < 1+rng.IntN(2); i++ {
		c := ctr{n: 1, mem: 2048 * (1 + rng.Int64N(12)), cores: 10 * rng.Int64N(6)}
		switch rng.IntN(6) {
		case 0:
			c.cores = 100
		case 1:
			c.mem = -1
		}
		ctrs = append(ctrs, c)
	}
	return npuPod("p", "Ascend910B3", ctrs, ascendproto.AnnotationVNPUMode, ascendproto.ModeHAMiCore)
}

// cardUsage reports memory, cores, AI CPUs and vNPUs per card, and any use
// of the unhealthy card.
func cardUsage(d device.Devices) []conformance.Usage {
	dev := d.(*Devices)
	cards, _ := dev.CardUsage()
	out := conformance.CardUsage(cards, "vNPUs")
	for i := range dev.cards {
		out = append(out, conformance.Usage{Name: "card " + strconv.Itoa(i) + " AI CPUs",
			Used: int64(dev.cards[i].slice.Used.AICPU), Capacity: int64(dev.b.chip.Total.AICPU)})
	}
	return out
}

func malformed(values ...string) []conformance.Malformed {
	key := ascendproto.KeysFor("Ascend910B3").Allocated
	out := make([]conformance.Malformed, 0, len(values))
	for _, v := range values {
		out = append(out, conformance.Malformed{Name: "devices-allocated " + strconv.Quote(v),
			Annotations: map[string]string{key: v}, Key: key})
	}
	return out
}

var badRecords = []string{"", ";", "NPU-9,Ascend910B3,16384,0:;", "NPU-0,Ascend910B4,16384,0:;", "NPU-0,Ascend910B3,x,0:;",
	"NPU-0,Ascend910B3,16384:;", "NPU-0,Ascend910B3,0,0:;", "NPU-0,Ascend910B3,99999999,0:;", "NPU-0,Ascend910B3,1,101:;",
	"NPU-0,Ascend910B3,1,0:NPU-0,Ascend910B3,1,0:;", "a;b;c;d", "NPU-0,Ascend910B3,1,0;"}

func TestConformanceTemplateMode(t *testing.T) {
	conformance.Run(t, conformance.Suite{
		Backend:   newTestBackend(t, "Ascend910B3", false),
		Node:      func() *v1.Node { return ascendNode("n", "Ascend910B3", conformanceCards()) },
		Pod:       templatePod,
		Usage:     cardUsage,
		Malformed: malformed(badRecords...),
		Seed:      7,
	})
}

func TestConformanceHAMiCoreMode(t *testing.T) {
	conformance.Run(t, conformance.Suite{
		Backend: newTestBackend(t, "Ascend910B3", false),
		Node: func() *v1.Node {
			return ascendNode("n", "Ascend910B3", conformanceCards(), ascendproto.AnnotationNodeHAMiCore, "true")
		},
		Pod:       softPod,
		Usage:     cardUsage,
		Malformed: malformed(badRecords...),
		Seed:      11,
	})
}
