package deviceshare

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/deviceshare/api"
)

// sessionState is one scheduling session's view of the devices. It reads
// the ledger's Devices and copies a node's Devices of one type on the first
// allocation there (copy on write), so filtering thousands of nodes costs no
// copies and the ledger is never written by a session.
//
// Concurrency: Volcano calls predicates and node-order functions from
// several goroutines at once, but never while it runs the allocation event
// handlers, which are the only writers. Everything read concurrently is built
// in newSessionState and only its fields' contents change afterwards.
type sessionState struct {
	args     Args
	backends []api.Backend
	nodes    map[string]*sessionNode
	// requests holds, per pending task, which backends it asks for.
	requests map[vcapi.TaskID]*taskRequest
	// assumedPods are annotated copies of pods whose bind is in flight.
	assumedPods map[types.UID]*v1.Pod
	// allocs are the allocations made in this session, for Deallocate.
	allocs map[vcapi.TaskID]*sessionAlloc
	// evicted are placed pods whose devices this session released (an
	// eviction), for a discarded eviction to take them back.
	evicted map[vcapi.TaskID]*evictedPod
}

type sessionNode struct {
	devices []*sessionDevices // indexed like sessionState.backends
	// lockedOutside is set when node locking is on and an allocation from an
	// earlier session (or, by annotation, another scheduler) is in flight.
	lockedOutside bool
	// inSession counts this session's allocations on the node.
	inSession int
}

// locked reports whether node locking keeps further allocations off the node.
func (n *sessionNode) locked() bool { return n.lockedOutside || n.inSession > 0 }

type sessionDevices struct {
	base   api.Devices
	own    api.Devices
	invErr error
}

func (d *sessionDevices) read() api.Devices {
	if d.own != nil {
		return d.own
	}
	return d.base
}

func (d *sessionDevices) write() api.Devices {
	if d.own == nil {
		d.own = d.base.DeepCopy()
	}
	return d.own
}

// taskRequest is what a task asks of the device backends.
type taskRequest struct {
	backends []int
	// invalid is set when a backend refused the request outright.
	invalid error
	// unserved names a device resource the pod asks for that no enabled
	// backend serves (the device type is off, or its vnpus entry was
	// removed): placing such a pod would start it without cards.
	unserved string
}

type sessionAlloc struct {
	node      string
	original  *v1.Pod
	annotated *v1.Pod
	parts     []allocPart
}

type allocPart struct {
	devices     *sessionDevices
	reservation *api.Reservation
}

type evictedPod struct {
	pod   *v1.Pod
	parts []*sessionDevices
}

// requestOf returns what the task asks for, computing it when the task was
// not known at session open (it is then not cached: callers may run
// concurrently).
func (s *sessionState) requestOf(task *vcapi.TaskInfo) *taskRequest {
	if r, ok := s.requests[task.UID]; ok {
		return r
	}
	return s.computeRequest(task.Pod)
}

func (s *sessionState) computeRequest(pod *v1.Pod) *taskRequest {
	r := s.claimedRequest(pod)
	if r == nil {
		if name := knownDeviceResource(pod); name != "" {
			return &taskRequest{unserved: string(name)}
		}
	}
	return r
}

func (s *sessionState) claimedRequest(pod *v1.Pod) *taskRequest {
	var r *taskRequest
	for i, b := range s.backends {
		if !b.HasDeviceRequest(pod) {
			continue
		}
		if r == nil {
			r = &taskRequest{}
		}
		r.backends = append(r.backends, i)
		if err := b.ValidateRequest(pod); err != nil && r.invalid == nil {
			r.invalid = err
		}
	}
	return r
}

// effectivePod is the pod as the ledger accounts it: with its assumed
// annotations while its bind is in flight.
func (s *sessionState) effectivePod(pod *v1.Pod) *v1.Pod {
	if p, ok := s.assumedPods[pod.UID]; ok {
		return p
	}
	return pod
}
