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
// (device.Fitter, passed with each call).

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

// fitOn, scoreOn and allocateWith call the Devices with the task's
// prepared request and the node's host resources where they take them
// (device.Fitter, prep non-nil), else FilterNode, ScoreNode and Allocate.
// fitOn's scored is false when the score was not computed.
func fitOn(d device.Devices, pod *v1.Pod, prep device.Prepared, policy string, h device.Host) (score float64, st *device.Status, scored bool) {
	if f, ok := d.(device.Fitter); ok && prep != nil {
		score, st = f.Fit(pod, prep, h)
		return score, st, true
	}
	return 0, d.FilterNode(pod, policy), false
}

func scoreOn(d device.Devices, pod *v1.Pod, prep device.Prepared, policy string, h device.Host) float64 {
	if f, ok := d.(device.Fitter); ok && prep != nil {
		score, _ := f.Fit(pod, prep, h)
		return score
	}
	return d.ScoreNode(pod, policy)
}

func allocateWith(d device.Devices, pod *v1.Pod, prep device.Prepared, policy string, h device.Host) (*device.Reservation, error) {
	if f, ok := d.(device.Fitter); ok && prep != nil {
		return f.AllocatePrepared(pod, prep, h)
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
		score += scoreOn(d.read(), task.Pod, s.barePrep(task, i), device.PolicyFragment, hostOf(device.PolicyFragment, node.Idle, nil))
	}
	return score
}

// prepareBare prepares, for the backends that score pods without devices,
// a pending task's reading once for the session (sessionState.bare).
func (s *sessionState) prepareBare(task *vcapi.TaskInfo) {
	var preps []device.Prepared
	for i, b := range s.backends {
		if _, ok := b.(bareNodeScorer); !ok {
			continue
		}
		pr, ok := b.(device.Preparer)
		if !ok {
			continue
		}
		prep, err := pr.Prepare(task.Pod, device.PolicyFragment)
		if err != nil {
			continue
		}
		if preps == nil {
			preps = make([]device.Prepared, len(s.backends))
		}
		preps[i] = prep
	}
	if preps == nil {
		return
	}
	if s.bare == nil {
		s.bare = make(map[vcapi.TaskID][]device.Prepared)
	}
	s.bare[task.UID] = preps
}

// barePrep is backend i's prepared reading of a task without a device
// request: the session's (prepareBare), or one made now for a task the
// session did not see pending.
func (s *sessionState) barePrep(task *vcapi.TaskInfo, i int) device.Prepared {
	if preps, ok := s.bare[task.UID]; ok {
		return preps[i]
	}
	if pr, ok := s.backends[i].(device.Preparer); ok {
		if prep, err := pr.Prepare(task.Pod, device.PolicyFragment); err == nil {
			return prep
		}
	}
	return nil
}
