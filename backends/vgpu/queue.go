package vgpu

import (
	v1 "k8s.io/api/core/v1"

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
	var req podRequest
	if err := b.parse(pod, "", &req); err != nil || req.empty() {
		return nil
	}
	spans, phases := vgpuproto.Spans(req.roles)
	var cards, mem, cores int64
	for p := 0; p < phases; p++ {
		var pc, pm, pco int64
		for _, c := range req.ctrs() {
			if req.roles != nil && (p < spans[c.ctr].First || p > spans[c.ctr].Last) {
				continue
			}
			n := int64(c.nums)
			pc += n
			pm += n * c.memMiB
			pco += n * int64(c.cores)
		}
		cards, mem, cores = max(cards, pc), max(mem, pm), max(cores, pco)
	}
	out := map[string]float64{
		string(b.resCount): float64(cards),
		string(b.resCores): float64(cores),
	}
	if mem > 0 {
		out[string(b.resMemory)] = float64(mem / b.factor)
	}
	return out
}
