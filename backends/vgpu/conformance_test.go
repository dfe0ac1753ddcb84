package vgpu

import (
	"math/rand/v2"
	"strconv"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/conformance"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// conformanceNode mixes card sizes and modes: 16 GiB, 80 GiB, a MIG A100,
// an unhealthy card and one shared by at most two pods.
func conformanceNode() *v1.Node {
	return vgpuNode([]card{
		gpu("GPU-0", 16384),
		gpu("GPU-1", 81920).withType("NVIDIA-A100-SXM4-80GB"),
		gpu("GPU-2", 40960).withType("NVIDIA-A100-SXM4-40GB").inMode(vgpuproto.ModeMIG),
		gpu("GPU-3", 16384).unhealthy(),
		gpu("GPU-4", 24576).withCount(2),
	})
}

// randomPod asks for one or two containers with one to three cards of
// memory, a percentage or the default, and cores; one pod in three also
// has init containers or sidecars asking for one card each (so that every
// container after them may inherit it).
func randomPod(rng *rand.Rand) *v1.Pod {
	var ctrs []ctr
	for i := 0; i < 1+rng.IntN(2); i++ {
		c := ctr{n: 1 + rng.Int64N(3), mem: -1, pct: -1, cores: -1}
		if rng.IntN(5) == 0 {
			c.n = 1
		}
		switch rng.IntN(4) {
		case 0:
			c.mem = 1024 * (1 + rng.Int64N(12))
		case 1:
			c.pct = 10 * (1 + rng.Int64N(6))
		case 2:
			c.mem = 512 * (1 + rng.Int64N(4))
		}
		switch rng.IntN(5) {
		case 0:
			c.cores = 100
		case 1, 2:
			c.cores = 10 * rng.Int64N(6)
		}
		ctrs = append(ctrs, c)
	}
	var ann []string
	if rng.IntN(4) == 0 {
		ann = append(ann, AnnotationGroupName, "pg"+strconv.Itoa(rng.IntN(3)), vgpuproto.AnnotationPodGroupPolicy, vgpuproto.PodGroupPolicySpread)
	}
	pod := vpod("p", ctrs, ann...)
	if rng.IntN(3) == 0 {
		kinds := [...]string{"i", "s", "is", "si", "ii"}[rng.IntN(5)]
		inits := make([]ctr, len(kinds))
		for i := range inits {
			inits[i] = ctr{n: 1, mem: 1024 * (1 + rng.Int64N(12)), pct: -1, cores: 10 * rng.Int64N(6)}
		}
		pod = withInit(pod, kinds, inits...)
	}
	return pod
}

// cardUsage reports memory, cores and share count per card, and any use
// of the unhealthy card.
func cardUsage(d device.Devices) []conformance.Usage {
	cards, _ := d.(*Devices).CardUsage()
	return conformance.CardUsage(cards, "pods")
}

func malformed(values ...string) []conformance.Malformed {
	out := make([]conformance.Malformed, 0, len(values))
	for _, v := range values {
		out = append(out, conformance.Malformed{Name: "vgpu-ids-new " + strconv.Quote(v),
			Annotations: map[string]string{vgpuproto.AnnotationIDs: v}, Key: vgpuproto.AnnotationIDs})
	}
	return out
}

func TestConformance(t *testing.T) {
	conformance.Run(t, conformance.Suite{
		Backend: newBackend(t),
		Node:    conformanceNode,
		Pod:     randomPod,
		Usage:   cardUsage,
		Malformed: malformed("", "GPU-9,NVIDIA,1000,10:", "GPU-0,NVIDIA,x,10:", "GPU-0,NVIDIA,1000:",
			"GPU-0,NVIDIA,-1,10:", "GPU-0,NVIDIA,10,101:", "GPU-0,NVIDIA,1,1:GPU-0,NVIDIA,1,1:",
			"GPU-0[group1-0],NVIDIA,1,1:", "GPU-2[group9-0],NVIDIA,1,1:", "GPU-2[group1-99],NVIDIA,1,1:",
			"a;b;c;d", "GPU-0,NVIDIA,1,1::"),
		Seed: 42,
	})
}
