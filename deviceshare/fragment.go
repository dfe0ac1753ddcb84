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
// (device.HostAware, passed with each call).

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

// observeRequest shows a pending pod's request to the backends it asks.
func observeRequest(backends []device.Backend, idx []int, pod *v1.Pod) {
	for _, i := range idx {
		if o, ok := backends[i].(requestObserver); ok {
			o.ObserveRequest(pod)
		}
	}
}

// hostOf is the node's idle CPU and memory for the fragment policy, plus
// what the task being placed already took from them (Volcano updates the
// node before raising the allocation event); unknown under other policies
// or without an idle figure.
func hostOf(policy string, idle, taken *vcapi.Resource) device.Host {
	if policy != device.PolicyFragment || idle == nil {
		return device.Host{}
	}
	cpu, mem := idle.MilliCPU, idle.Memory
	if taken != nil {
		cpu, mem = cpu+taken.MilliCPU, mem+taken.Memory
	}
	return device.Host{CPUMilli: int64(cpu), MemMiB: int64(mem) / (1 << 20), Known: true}
}

// filterOn, scoreOn and allocateWith call the Devices with the node's host
// resources where they take them (device.HostAware).
func filterOn(d device.Devices, pod *v1.Pod, policy string, h device.Host) *device.Status {
	if ha, ok := d.(device.HostAware); ok && h.Known {
		return ha.FilterNodeOn(pod, policy, h)
	}
	return d.FilterNode(pod, policy)
}

func scoreOn(d device.Devices, pod *v1.Pod, policy string, h device.Host) float64 {
	if ha, ok := d.(device.HostAware); ok && h.Known {
		return ha.ScoreNodeOn(pod, policy, h)
	}
	return d.ScoreNode(pod, policy)
}

func allocateWith(d device.Devices, pod *v1.Pod, policy string, h device.Host) (*device.Reservation, error) {
	if ha, ok := d.(device.HostAware); ok && h.Known {
		return ha.AllocateOn(pod, policy, h)
	}
	return d.Allocate(pod, policy)
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
		score += scoreOn(d.read(), task.Pod, device.PolicyFragment, hostOf(device.PolicyFragment, node.Idle, nil))
	}
	return score
}
