package vgpu

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

var _ device.QueueRequester = (*Backend)(nil)

// QueueRequest returns what the pod will hold, in the resources
// AddQueueResource reports: cards, memory (in the memory resource's unit)
// and cores, summed over every card of every container. For a pod whose
// init containers ask for cards, the most its containers running together
// ask for (each resource on its own, as HAMi's quota check and Kubernetes'
// effective request count them): no more than it will hold once placed
// (per card at its peak). Memory asked as a percentage of a card depends
// on the card and is left out.
func (b *Backend) QueueRequest(pod *v1.Pod) map[string]float64 {
	var req request.Pod
	if err := b.parse(pod, "", &req); err != nil || req.Empty() {
		return nil
	}
	spans, phases := vgpuproto.Spans(req.Roles)
	var cards, mem, cores int64
	for p := 0; p < phases; p++ {
		var pc, pm, pco int64
		for _, c := range req.Ctrs() {
			if req.Roles != nil && (p < spans[c.Entry].First || p > spans[c.Entry].Last) {
				continue
			}
			n := int64(c.Nums)
			pc += n
			pm += n * c.MemMiB
			pco += n * int64(c.Cores)
		}
		cards, mem, cores = max(cards, pc), max(mem, pm), max(cores, pco)
	}
	out := map[string]float64{
		string(b.parser.ResCount): float64(cards),
		string(b.parser.ResCores): float64(cores),
	}
	if mem > 0 {
		out[string(b.parser.ResMemory)] = float64(mem / b.parser.Factor)
	}
	return out
}
