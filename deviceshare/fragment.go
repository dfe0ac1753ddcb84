package deviceshare

import (
	v1 "k8s.io/api/core/v1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
)

// The fragment policy (api.PolicyFragment) scores a node by how much GPU
// its placement would strand for the workload the backend has seen. The
// plugin feeds it two things the Devices interface does not carry: the
// requests of pending pods (requestObserver) and the node's free CPU and
// memory, since a card a node cannot host any pod for is stranded too
// (hostAware).

// bareNodeScorer is implemented by backends whose fragment policy also
// places pods that ask for no devices at all: such a pod's CPU and memory
// can strand the node's free cards (no pod needing them fits beside it),
// so its ScoreNode on the backend's devices says how much it would
// strand, and BareNodeScore is its score on a node without the backend's
// devices, where it strands nothing.
type bareNodeScorer interface {
	BareNodeScore() float64
}

// requestObserver is implemented by backends that learn the workload mix
// from the pending pods they are shown.
type requestObserver interface {
	ObserveRequest(pod *v1.Pod)
}

// hostAware is implemented by Devices whose score depends on the node's
// free CPU (milli-cores) and memory (MiB). The value is transient: it is
// set right before ScoreNode or Allocate and not copied by DeepCopy.
type hostAware interface {
	SetHostIdle(cpuMilli, memMiB int64)
}

// observeRequest shows a pending pod's request to the backends it asks.
func observeRequest(backends []device.Backend, idx []int, pod *v1.Pod) {
	for _, i := range idx {
		if o, ok := backends[i].(requestObserver); ok {
			o.ObserveRequest(pod)
		}
	}
}

// tellHost gives the devices the node's idle CPU and memory, plus what
// the task being placed already took from them (Volcano updates the
// node before raising the allocation event).
func tellHost(d device.Devices, idle *vcapi.Resource, taken *vcapi.Resource) {
	h, ok := d.(hostAware)
	if !ok || idle == nil {
		return
	}
	cpu, mem := idle.MilliCPU, idle.Memory
	if taken != nil {
		cpu, mem = cpu+taken.MilliCPU, mem+taken.Memory
	}
	h.SetHostIdle(int64(cpu), int64(mem)/(1<<20))
}

// hostOnlyScore is the fragment policy's score of a node for a task that
// asks for no devices: summed over the backends that place such pods, the
// backend's ScoreNode on the node's devices, or its BareNodeScore where
// the node has none (or an unreadable registration: nothing usable to
// strand). Measured on the openb traces (docs/quality.md, "One code
// path"), leaving these pods to the other plugins strands up to 1.5
// points more GPU at 130% arrival.
func (s *sessionState) hostOnlyScore(task *vcapi.TaskInfo, node *vcapi.NodeInfo) float64 {
	var score float64
	sn := s.nodeOf(node)
	for i, b := range s.backends {
		bs, ok := b.(bareNodeScorer)
		if !ok {
			continue
		}
		var d *sessionDevices
		if sn != nil {
			d = sn.devices[i]
		}
		if d == nil || d.invErr != nil {
			score += bs.BareNodeScore()
			continue
		}
		tellHost(d.read(), node.Idle, nil)
		score += d.read().ScoreNode(task.Pod, device.PolicyFragment)
	}
	return score
}
