package vgpu

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/deviceshare/api"
)

var _ api.QueueRequester = (*Backend)(nil)

// QueueRequest returns what the pod will hold, in the resources
// AddQueueResource reports: cards, memory (in the memory resource's unit)
// and cores, summed over every card of every container. Memory asked as a
// percentage of a card depends on the card and is left out.
func (b *Backend) QueueRequest(pod *v1.Pod) map[string]float64 {
	var req podRequest
	if err := b.parse(pod, "", &req); err != nil || req.empty() {
		return nil
	}
	var cards, mem, cores int64
	for _, c := range req.ctrs() {
		n := int64(c.nums)
		cards += n
		mem += n * c.memMiB
		cores += n * int64(c.cores)
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
