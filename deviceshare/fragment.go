package deviceshare

import (
	v1 "k8s.io/api/core/v1"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/deviceshare/api"
)

// The fragment policy (api.PolicyFragment) scores a node by how much GPU
// its placement would strand for the workload the backend has seen. The
// plugin feeds it two things the Devices interface does not carry: the
// requests of pending pods (requestObserver) and the node's free CPU and
// memory, since a card a node cannot host any pod for is stranded too
// (hostAware).

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
func observeRequest(backends []api.Backend, idx []int, pod *v1.Pod) {
	for _, i := range idx {
		if o, ok := backends[i].(requestObserver); ok {
			o.ObserveRequest(pod)
		}
	}
}

// tellHost gives the devices the node's idle CPU and memory, plus what
// the task being placed already took from them (Volcano updates the
// node before raising the allocation event).
func tellHost(d api.Devices, idle *vcapi.Resource, taken *vcapi.Resource) {
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
