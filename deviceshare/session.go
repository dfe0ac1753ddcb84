package deviceshare

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/fitcache"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/deviceshare/queuecap"
)

// sessionState is one scheduling session's view of the devices. It reads
// the node state's Devices and copies a node's Devices of one type on the first
// allocation there (copy on write), so filtering thousands of nodes costs no
// copies and the node state is never written by a session.
//
// Concurrency: Volcano calls predicates and node-order functions from
// several goroutines at once, but never while it runs the allocation event
// handlers, which are the only writers. Everything read concurrently is built
// in newSessionState and only its fields' contents change afterwards.
type sessionState struct {
	args     pluginargs.Args
	backends []device.Backend
	nodes    map[string]*sessionNode
	// slab holds the session's nodes; a node's index in it is its index
	// in stamps and in the result tables.
	slab []sessionNode
	// byInfo is the nodes' indexes keyed by Volcano's NodeInfo of the
	// session (the pointers its actions pass to the predicate and the
	// scores): a pointer hashes and compares without reading the name.
	byInfo map[*vcapi.NodeInfo]int32
	// fits is the predicate's one cache (fitcache): per node index its
	// stamp, per request key its result table, the session's interned
	// failures and statuses.
	fits *fitcache.Cache
	// requests holds, per pending task, which backends it asks for (nil:
	// no device request). Tasks of one request key share one (openRequest).
	requests map[vcapi.TaskID]*taskRequest
	// bare holds, under the fragment policy, per pending task without a
	// device request, each backend's prepared reading of it by backend
	// index (nil where the backend scores no such pod): hostOnlyScore
	// scores it on every node.
	bare map[vcapi.TaskID][]device.Prepared
	// assumedPods are annotated copies of pods whose bind is in flight.
	assumedPods map[types.UID]*v1.Pod
	// allocs are the allocations made in this session, for Deallocate.
	allocs map[vcapi.TaskID]*sessionAlloc
	// evicted are placed pods whose devices this session released (an
	// eviction), for a discarded eviction to take them back.
	evicted map[vcapi.TaskID]*evictedPod
	// preempting is the preemption in progress, set by the victim
	// functions (see preempt.go); nil outside a victim loop.
	preempting *preemptSlot
	// queues is the device accounting of queues with a capability or a
	// deserved amount on a device resource (see queue.go); nil without.
	queues *queuecap.Accounts
	// quotas is the accounting of namespace quotas on device resources
	// (see quota.go); nil without.
	quotas *quotaState
}

type sessionNode struct {
	devices []*sessionDevices // indexed like sessionState.backends
	// lockedOutside is set when node locking is on and an allocation from an
	// earlier session (or, by annotation, another scheduler) is in flight.
	lockedOutside bool
	// inSession counts this session's allocations on the node.
	inSession int
	// idx is the node's index in the session's slab and stamps.
	idx int32
}

// locked reports whether node locking keeps further allocations off the node.
func (n *sessionNode) locked() bool { return n.lockedOutside || n.inSession > 0 }

// sessionDevices is one node's devices of one type as the session sees
// them: the node state's (base) until the session writes, then its own copy.
//
// The view is the node's *future* state, as Volcano's FutureIdle: pods that
// are terminating (Releasing at session open, or evicted in this session)
// still hold their cards in the node state, but not in this view, so that a
// preemptor can be pipelined onto what its victims free and the next
// session does not evict again for capacity already on its way. now()
// adds them back for pods that would be bound at once.
type sessionDevices struct {
	base   device.Devices
	own    device.Devices
	invErr error
	// gen is the node state's generation of base's inventory.
	gen uint64
	// releasing are the terminating pods whose cards the view treats as
	// free, by UID, as accounted (with their allocation annotations).
	releasing map[types.UID]*v1.Pod
	// stamp is the node's version for the result tables: every write
	// moves it.
	stamp *fitcache.Stamp
}

func (d *sessionDevices) read() device.Devices {
	if d.own != nil {
		return d.own
	}
	return d.base
}

func (d *sessionDevices) write() device.Devices {
	d.stamp.Touch()
	if d.own == nil {
		d.own = d.base.DeepCopy()
	}
	return d.own
}

// now returns the node's cards as they are at this moment: the view with
// the terminating pods' allocations added back. It is the view itself when
// nothing is terminating, and a fresh copy otherwise (it only reads d, so
// concurrent predicates may call it).
func (d *sessionDevices) now() device.Devices {
	if len(d.releasing) == 0 {
		return d.read()
	}
	c := d.read().DeepCopy()
	for _, p := range d.releasing {
		if err := c.AddResource(p); err != nil {
			klog.V(4).InfoS("Terminating pod's devices cannot be accounted back", "pod", klog.KObj(p), "err", err)
		}
	}
	return c
}

// release takes a terminating pod's allocation out of the view.
func (d *sessionDevices) release(pod *v1.Pod) error {
	if err := d.write().SubResource(pod); err != nil {
		return err
	}
	if d.releasing == nil {
		d.releasing = make(map[types.UID]*v1.Pod)
	}
	d.stamp.SetVolatile()
	d.releasing[pod.UID] = pod
	return nil
}

// restore puts back what release took (a discarded eviction).
func (d *sessionDevices) restore(pod *v1.Pod) error {
	delete(d.releasing, pod.UID)
	return d.write().AddResource(pod)
}

// taskRequest is what a task asks of the device backends.
type taskRequest struct {
	backends []int
	// prepared holds, by position in backends, each Preparer backend's
	// reading of the pod (nil for the others, and for an invalid request).
	prepared []device.Prepared
	// results is the table of the request's key (nil: the results are
	// not kept, see results.go).
	results *fitcache.Table
	// invalid is set when a backend refused the request outright.
	invalid error
	// unserved names a device resource the pod asks for that no enabled
	// backend serves (the device type is off, or its vnpus entry was
	// removed): placing such a pod would start it without cards.
	unserved string
	// quota is what the pod would hold of its namespace's quota resources,
	// computed at session open (nil: not computed, see quotaState.askOf).
	quota *quotaAsk
}

type sessionAlloc struct {
	node     string
	original *v1.Pod
	// annotations are the allocation's (shared with its bind decision);
	// nil until every backend allocated. The annotated pod is built when
	// needed (annotated), not kept: a session holds thousands of these.
	annotations map[string]string
	parts       []allocPart
	// pipelined allocations wait for terminating pods: they hold their
	// cards in the session's view but are neither bound nor assumed.
	pipelined bool
	// queue and held are the queue's device accounting of the allocation.
	queue vcapi.QueueID
	held  map[string]float64
}

// annotated is the pod with the allocation's annotations, as the
// backends account it; the original pod before they are known.
func (a *sessionAlloc) annotated() *v1.Pod {
	if a.annotations == nil {
		return a.original
	}
	return device.ApplyReservation(a.original, &device.Reservation{Annotations: a.annotations})
}

type allocPart struct {
	devices     *sessionDevices
	reservation *device.Reservation
}

type evictedPod struct {
	pod   *v1.Pod
	parts []*sessionDevices
	queue vcapi.QueueID
	held  map[string]float64
}

// nodeOf returns the session's view of node (nil for a node the session
// does not know).
func (s *sessionState) nodeOf(node *vcapi.NodeInfo) *sessionNode {
	if i, ok := s.indexOf(node); ok {
		return &s.slab[i]
	}
	return nil
}

// indexOf returns the node's index in the session's slab, stamps and
// result tables; ok is false for a node the session does not know.
func (s *sessionState) indexOf(node *vcapi.NodeInfo) (int32, bool) {
	if i, ok := s.byInfo[node]; ok {
		return i, true
	}
	if sn := s.nodes[node.Name]; sn != nil {
		return sn.idx, true
	}
	return 0, false
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
	if r != nil && s.args.SchedulePolicy == device.PolicyFragment {
		observeRequest(s.backends, r.backends, pod)
	}
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
		// A Preparer's reading checks the request as ValidateRequest
		// does: one read of the pod per task.
		var err error
		if pr, ok := b.(device.Preparer); ok {
			var prep device.Prepared
			if prep, err = pr.Prepare(pod, s.args.SchedulePolicy); err == nil {
				if r.prepared == nil {
					r.prepared = make([]device.Prepared, len(s.backends)) // by position in r.backends
				}
				r.prepared[len(r.backends)-1] = prep
			}
		} else {
			err = b.ValidateRequest(pod)
		}
		if err != nil && r.invalid == nil {
			r.invalid = err
		}
	}
	return r
}

// prep is the prepared request of the j-th of the request's backends, nil
// when it prepares none.
func (r *taskRequest) prep(j int) device.Prepared {
	if j >= len(r.prepared) {
		return nil
	}
	return r.prepared[j]
}

// effectivePod is the pod as the node state accounts it: with its assumed
// annotations while its bind is in flight.
func (s *sessionState) effectivePod(pod *v1.Pod) *v1.Pod {
	if p, ok := s.assumedPods[pod.UID]; ok {
		return p
	}
	return pod
}

// advertisedTotals are the node totals its devices advertise
// (device.Advertiser), nil for none.
func (s *sessionState) advertisedTotals(node string) v1.ResourceList {
	sn := s.nodes[node]
	if sn == nil {
		return nil
	}
	var out v1.ResourceList
	for _, d := range sn.devices {
		if d == nil || d.base == nil {
			continue
		}
		adv, ok := d.base.(device.Advertiser)
		if !ok {
			continue
		}
		for k, q := range adv.Advertised() {
			if out == nil {
				out = v1.ResourceList{}
			}
			out[k] = q
		}
	}
	return out
}

// touch records a change to what the node's results read.
func (s *sessionState) touch(node string) {
	if sn := s.nodes[node]; sn != nil {
		s.fits.Stamp(sn.idx).Touch()
	}
}

// status returns the session's shared status of code and reason
// (fitcache.Cache.Status).
func (s *sessionState) status(code int, reason string) *vcapi.Status {
	return s.fits.Status(PluginName, code, reason)
}

// fitError is the predicate's error for one status of code and reason.
func (s *sessionState) fitError(task *vcapi.TaskInfo, node *vcapi.NodeInfo, code int, reason string) error {
	return vcapi.NewFitErrWithStatus(task, node, s.status(code, reason))
}

// openRequest is computeRequest for a task pending when the session opens,
// with the result table of its request's key. Tasks whose requests have
// one key (most of a job's pods ask alike) share one taskRequest, prepared
// once (device.Preparer): a session holds one per key, not per task. It is
// read-only once built; the quota ask, the pod's own, is set on a copy
// (openQuotas). It is called before anything runs concurrently.
func (s *sessionState) openRequest(task *vcapi.TaskInfo, shared map[string]*taskRequest) *taskRequest {
	key, keyed := s.requestKey(task.Pod)
	if keyed {
		if r := shared[string(key)]; r != nil && s.validUnprepared(task.Pod, r) {
			if s.args.SchedulePolicy == device.PolicyFragment {
				observeRequest(s.backends, r.backends, task.Pod)
			}
			return r
		}
	}
	r := s.computeRequest(task.Pod)
	if !keyed || r == nil || r.invalid != nil || r.unserved != "" {
		return r
	}
	keyers := make([]device.ResultKeyer, len(r.backends))
	for j, i := range r.backends {
		keyers[j] = s.backends[i].(device.ResultKeyer) // requestKey made sure
	}
	r.results = s.fits.Table(string(key), keyers)
	shared[string(key)] = r
	return r
}

// requestKey is the key of the pod's request across the backends it asks
// of, each backend's index and ResultKey; keyed is false when the pod asks
// no backend or some backend keys no results for it.
func (s *sessionState) requestKey(pod *v1.Pod) (key []byte, keyed bool) {
	for i, b := range s.backends {
		if !b.HasDeviceRequest(pod) {
			continue
		}
		rk, ok := b.(device.ResultKeyer)
		if !ok {
			return nil, false
		}
		k, ok := rk.ResultKey(pod, s.args.SchedulePolicy)
		if !ok {
			return nil, false
		}
		key = strconv.AppendInt(key, int64(i), 10)
		key = append(append(append(key, 0), k...), 0)
	}
	return key, key != nil
}

// validUnprepared reports whether the backends of the shared request r
// that prepare nothing find the pod's request valid, as claimedRequest
// would ask them; a Preparer's reading is the same for every pod of the
// key (device.Preparer).
func (s *sessionState) validUnprepared(pod *v1.Pod, r *taskRequest) bool {
	for _, i := range r.backends {
		b := s.backends[i]
		if _, ok := b.(device.Preparer); !ok && b.ValidateRequest(pod) != nil {
			return false
		}
	}
	return true
}
