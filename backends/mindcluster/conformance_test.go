package mindcluster

import (
	"math/rand/v2"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/conformance"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

// conformanceNode has four 8-core chips: 0-2 offered, 3 unhealthy.
func conformanceNode() *v1.Node {
	return node310P("n", 4, chips(0, 1, 2, 3), mindclusterproto.AnnotationUnhealthyChips, chips(3))
}

// randomPod asks for a vNPU (1, 2 or 4 AI cores, any level and DVPP) or
// one or two whole chips.
func randomPod(rng *rand.Rand) *v1.Pod {
	cores := []int64{1, 2, 4, 4, 8, 16}[rng.IntN(6)]
	level := []string{"", "low", "high"}[rng.IntN(3)]
	dvpp := []string{"", "yes", "no", "null"}[rng.IntN(4)]
	p := corePod("p", cores)
	if level != "" {
		p.Labels[mindclusterproto.LabelVNPULevel] = level
	}
	if dvpp != "" {
		p.Labels[mindclusterproto.LabelVNPUDVPP] = dvpp
	}
	return p
}

// chipUsage reports, per chip, AI cores, AI CPUs and memory against the
// chip's totals, whole-chip exclusivity (a whole-chip holder excludes
// every other holder) and any use of an unhealthy chip (capacity 0).
func chipUsage(d device.Devices) []conformance.Usage {
	dd := d.(*Devices)
	total := dd.inv.chip.Total
	var out []conformance.Usage
	for _, c := range dd.sortedChips() {
		i := strconv.Itoa(c.id)
		holders := int64(c.whole)
		if c.slice.Instances > 0 {
			holders++
		}
		out = append(out,
			conformance.Usage{Name: "chip " + i + " AI cores", Used: int64(c.slice.Used.AICore), Capacity: int64(total.AICore)},
			conformance.Usage{Name: "chip " + i + " AI CPUs", Used: int64(c.slice.Used.AICPU), Capacity: int64(total.AICPU)},
			conformance.Usage{Name: "chip " + i + " memory", Used: c.slice.Used.MemoryMiB, Capacity: total.MemoryMiB},
			conformance.Usage{Name: "chip " + i + " exclusive holders", Used: holders, Capacity: 1})
		if !c.healthy {
			out = append(out, conformance.Usage{Name: "chip " + i + " (unhealthy) pods",
				Used: int64(c.whole + c.slice.Instances), Capacity: 0})
		}
	}
	return out
}

func malformed(values ...string) []conformance.Malformed {
	out := make([]conformance.Malformed, 0, len(values))
	for _, v := range values {
		out = append(out, conformance.Malformed{
			Name:        "npu-core " + strconv.Quote(v),
			Annotations: map[string]string{mindclusterproto.AnnotationNPUCore: v},
			Key:         mindclusterproto.AnnotationNPUCore,
		})
	}
	return out
}

func TestConformance(t *testing.T) {
	for _, concurrent := range []bool{false, true} {
		t.Run("concurrent="+strconv.FormatBool(concurrent), func(t *testing.T) {
			conformance.Run(t, conformance.Suite{
				Backend: newBackend(t, Options{ConcurrentVNPUs: concurrent}),
				Node:    conformanceNode,
				Pod:     randomPod,
				Usage:   chipUsage,
				Malformed: malformed("x", "", "-vir01", "0-vir99", "0-", "0,0", "01", "99", "0,1-vir01",
					"0-vir01-x", "-1"),
				Seed: 7,
			})
		})
	}
}
