package gpushare

import (
	"math/rand/v2"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/conformance"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// conformanceNode has four cards of 16384 MiB, card 3 unhealthy.
func conformanceNode() *v1.Node { return fourCards(gpushareproto.AnnotationUnhealthyIDs, "3") }

// randomSharePod asks for 512 to 12288 MiB in one or two containers,
// sometimes with a larger init container.
func randomSharePod(rng *rand.Rand) *v1.Pod {
	p := sharePod("p", 512*(1+rng.Int64N(12)))
	if rng.IntN(3) == 0 {
		p.Spec.Containers = append(p.Spec.Containers, container("extra", gpushareproto.ResourceGPUMemory, "512"))
	}
	if rng.IntN(4) == 0 {
		p.Spec.InitContainers = []v1.Container{container("init", gpushareproto.ResourceGPUMemory,
			strconv.FormatInt(1024*(1+rng.Int64N(16)), 10))}
	}
	return p
}

// randomNumberPod asks for one to three cards.
func randomNumberPod(rng *rand.Rand) *v1.Pod {
	if rng.IntN(4) == 0 {
		return numberPod("p", 1, 1)
	}
	return numberPod("p", 1+rng.Int64N(3))
}

// cardUsage reports, per card, memory against capacity, whole-card
// exclusivity (a gpu-number pod excludes every other pod) and any use of an
// unhealthy card (capacity 0).
func cardUsage(d device.Devices) []conformance.Usage {
	var out []conformance.Usage
	for _, c := range d.(*Devices).Cards() {
		i := strconv.Itoa(c.Index)
		holders := int64(c.NumberPods)
		if c.SharePods > 0 {
			holders++
		}
		out = append(out,
			conformance.Usage{Name: "card " + i + " memory", Used: c.UsedMemory, Capacity: c.TotalMemory},
			conformance.Usage{Name: "card " + i + " exclusive holders", Used: holders, Capacity: 1})
		if !c.Healthy {
			out = append(out, conformance.Usage{Name: "card " + i + " (unhealthy) pods",
				Used: int64(c.SharePods + c.NumberPods), Capacity: 0})
		}
	}
	return out
}

func malformedIndex(values ...string) []conformance.Malformed {
	out := make([]conformance.Malformed, 0, len(values))
	for _, v := range values {
		out = append(out, conformance.Malformed{
			Name:        "gpu-index " + strconv.Quote(v),
			Annotations: map[string]string{gpushareproto.AnnotationGPUIndex: v},
			Key:         gpushareproto.AnnotationGPUIndex,
		})
	}
	return out
}

func TestConformance(t *testing.T) {
	tests := []struct {
		name      string
		mode      Mode
		pod       func(*rand.Rand) *v1.Pod
		malformed []conformance.Malformed
	}{
		{name: "share", mode: ModeShare, pod: randomSharePod,
			malformed: malformedIndex("x", "", "-1", "4", "0,1", "1.5", " 0", "0,")},
		{name: "number", mode: ModeNumber, pod: randomNumberPod,
			malformed: malformedIndex("x", "", "-1", "4", "0,0,0,0", "1.5", "0,,1", "0,1,2,3,4")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			conformance.Run(t, conformance.Suite{
				Backend:   newBackend(t, tc.mode),
				Node:      conformanceNode,
				Pod:       tc.pod,
				Usage:     cardUsage,
				Malformed: tc.malformed,
				Seed:      42,
			})
		})
	}
}
