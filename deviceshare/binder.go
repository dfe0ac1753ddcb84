package deviceshare

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
	"volcano.sh/volcano/pkg/scheduler/framework"

	"github.com/vgpushare/vshare/deviceshare/volcano"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

// bindTimeout bounds one pod's lock-and-bind round trips.
const bindTimeout = 30 * time.Second

// intentTTL bounds how long an unclaimed per-task note is kept (a pipelined
// task is never bound and never deallocated).
const intentTTL = 10 * time.Minute

// sweepEvery is how often take looks for expired notes.
const sweepEvery = time.Minute

// Binder binds pods the way Volcano's default binder does (a v1.Binding
// carrying the pod's annotations) and adds three things: the allocation
// annotations the session noted for the pod go on the binding, so the
// allocation travels with the bind; it takes the node lock right before the
// bind when deviceshare.NodeLockEnable asked for one, releasing it if the
// bind fails; and it refuses the bind of a pod whose device allocation
// failed in the session, so such a pod is retried instead of starting
// without its cards.
//
// It is Volcano's cache.Binder (Register checks it at compile time).
//
// TEST-ONLY, in binaries built with the vsharetest tag (the e2e
// framework's): with VSHARE_TEST_CRASH_AT_BIND (read once at start,
// crashhook.go) set, the process exits at a chosen Bind call or right before
// a chosen bind request, as the e2e fault campaign's
// scheduler-crash-mid-session fault; unset, the hook does nothing. Release
// builds have only the inert twin (crashhook_release.go).
//
// Locking: mu guards notes; Bind runs on the cache's bind goroutine while
// sessions add notes.
type Binder struct {
	st    *State
	mu    sync.Mutex
	notes map[vcapi.TaskID]*bindNote
	// swept is when take last dropped expired notes.
	swept time.Time
	// turns serialise binds per node for device types whose node agent
	// serves pending pods in order (device.OrderedAgent).
	turns *agentTurns
	// crash is the TEST-ONLY crash hook (crashhook.go with the vsharetest
	// tag, crashhook_release.go without); nil, and inert, unless armed.
	crash *crashHook
	// podsOnce hands turns the scheduler's pod informer (followPods).
	podsOnce sync.Once
}

type bindNote struct {
	since time.Time
	node  string
	// annotations record the allocation; they are added to the pod's own
	// annotations on the v1.Binding.
	annotations map[string]string
	locks       *nodeLocks
	// ordered are the allocated device types whose node agent serves one
	// pending pod per node at a time.
	ordered []orderedKey
	// inventories are the node's inventories the allocation was made on.
	inventories []inventoryStamp
	refused     error
}

// inventoryStamp names the ledger's generation of one device type's
// inventory on a node (deviceLedger.gen).
type inventoryStamp struct {
	backend string
	gen     uint64
}

// nodeLocks are the node locks a bind takes first, and how long a lock
// found on the node holds (deviceshare.NodeLockExpiry).
type nodeLocks struct {
	keys []string
	// agent are the keys reservations asked for (device.Reservation.NodeLocks):
	// a live one whose holder pod is gone or terminated is taken over, as
	// HAMi's scheduler does, since that agent would never release it.
	agent []string
	ttl   time.Duration
}

func newBinder(st *State) *Binder {
	b := &Binder{st: st, notes: make(map[vcapi.TaskID]*bindNote), turns: newAgentTurns(), crash: crashHookFromEnv()}
	b.turns.waited = st.metrics.agentWaited
	return b
}

// followPods hands the agent turns the session's pod informer, once: the
// scheduler cache's informer factory lives as long as the scheduler.
func (b *Binder) followPods(ssn *framework.Session) {
	b.podsOnce.Do(func() {
		if w := newPodWatch(ssn.InformerFactory()); w != nil {
			b.turns.pods.Store(w)
		}
	})
}

func (b *Binder) note(uid vcapi.TaskID) *bindNote {
	n := b.notes[uid]
	if n == nil {
		n = &bindNote{}
		b.notes[uid] = n
	}
	n.since = b.st.clock.Now()
	return n
}

// annotate records an allocation made in a session: the annotations to
// send with the pod's binding to node, the node locks to take first, the
// device types whose node agent must have served the node's previous pod
// first, and the inventories it was made on. It clears an earlier refusal
// of the task.
func (b *Binder) annotate(uid vcapi.TaskID, node string, annotations map[string]string, locks *nodeLocks, ordered []orderedKey, inv []inventoryStamp) {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.note(uid)
	n.node, n.annotations, n.locks, n.ordered, n.inventories, n.refused = node, annotations, locks, ordered, inv, nil
}

// inventoryChanged returns an error when one of the node's inventories the
// allocation was made on has changed since: a card reported unhealthy,
// resized or cordoned after the session that chose it (read at a later
// session's open). The bind is refused and the pod placed again on what the
// node reports now. A bind that waited for the node agent is the common
// case: the wait may last agentWait.
func (b *Binder) inventoryChanged(node string, inv []inventoryStamp) error {
	for _, s := range inv {
		if gen, ok := b.st.ledger.inventoryGen(node, s.backend); !ok || gen != s.gen {
			return fmt.Errorf("node %s reported a new %s inventory (a card's health, size or cordon) after this allocation was made; "+
				"the pod is placed again on what the node reports now", node, s.backend)
		}
	}
	return nil
}

// annotationsFor returns the allocation annotations noted for the task.
func (b *Binder) annotationsFor(uid vcapi.TaskID) map[string]string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if n := b.notes[uid]; n != nil {
		return n.annotations
	}
	return nil
}

func (b *Binder) refuse(uid vcapi.TaskID, err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.note(uid).refused = err
}

func (b *Binder) forget(uid vcapi.TaskID) {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.notes, uid)
}

// take removes and returns the task's note. At most once per sweepEvery it
// also drops notes nobody claimed within intentTTL, so a burst of binds does
// not walk every note once per pod.
func (b *Binder) take(uid vcapi.TaskID) *bindNote {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := b.notes[uid]
	delete(b.notes, uid)
	now := b.st.clock.Now()
	if now.Sub(b.swept) < sweepEvery {
		return n
	}
	b.swept = now
	for id, other := range b.notes {
		if now.Sub(other.since) > intentTTL {
			delete(b.notes, id)
		}
	}
	return n
}

// Bind binds the tasks and returns an error message per task that failed.
// Tasks for one node are bound in order; nodes are bound in parallel, since
// a bind may wait for the node agent to serve the node's previous pod.
func (b *Binder) Bind(client kubernetes.Interface, tasks []*vcapi.TaskInfo) map[vcapi.TaskID]string {
	b.crash.beforeCall(tasks) // test-only, inert unless armed
	defer b.crash.afterCall(tasks)
	var order []string
	byNode := make(map[string][]*vcapi.TaskInfo)
	for _, task := range tasks {
		if _, ok := byNode[task.NodeName]; !ok {
			order = append(order, task.NodeName)
		}
		byNode[task.NodeName] = append(byNode[task.NodeName], task)
	}
	var mu sync.Mutex
	errMsg := make(map[vcapi.TaskID]string)
	bindNode := func(tasks []*vcapi.TaskInfo) {
		for _, task := range tasks {
			if err := b.bindOne(client, task); err != nil {
				klog.ErrorS(err, "Failed to bind pod", "pod", klog.KObj(task.Pod), "node", task.NodeName)
				mu.Lock()
				errMsg[task.UID] = err.Error()
				mu.Unlock()
				continue
			}
			volcano.ObserveBound(task)
		}
	}
	if len(order) == 1 {
		bindNode(byNode[order[0]])
		return errMsg
	}
	var wg sync.WaitGroup
	for _, node := range order {
		wg.Add(1)
		go func(tasks []*vcapi.TaskInfo) {
			defer wg.Done()
			bindNode(tasks)
		}(byNode[node])
	}
	wg.Wait()
	return errMsg
}

func (b *Binder) bindOne(client kubernetes.Interface, task *vcapi.TaskInfo) error {
	n := b.take(task.UID)
	if n != nil && n.refused != nil {
		return fmt.Errorf("bind refused: %w", n.refused)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bindTimeout)
	defer cancel()
	pod := task.Pod
	podName := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	annotations := pod.Annotations
	if n != nil && n.node != task.NodeName {
		n = nil // noted for another node; that allocation is stale
	}
	if n != nil {
		annotations = bindingAnnotations(pod, n.annotations)
	}
	var turns heldTurns
	if n != nil {
		var err error
		if turns, err = b.turns.acquire(ctx, client, task.NodeName, pod.UID, n.ordered); err != nil {
			return fmt.Errorf("bind pod %s to node %s: %w", podName, task.NodeName, err)
		}
	}
	var bound *agentBoundPod
	defer func() { turns.release(bound) }()
	if n != nil {
		if err := b.inventoryChanged(task.NodeName, n.inventories); err != nil {
			b.st.metrics.inventoryRefused()
			return fmt.Errorf("bind pod %s to node %s: %w", podName, task.NodeName, err)
		}
	}
	var held []string
	if n != nil && n.locks != nil {
		for _, key := range n.locks.keys {
			var err error
			if slices.Contains(n.locks.agent, key) {
				err = nodelock.AcquireOrTakeOver(ctx, client, task.NodeName, key, podName, b.st.clock.Now(), n.locks.ttl, podGone(client))
			} else {
				err = nodelock.Acquire(ctx, client, task.NodeName, key, podName, b.st.clock.Now(), n.locks.ttl)
			}
			if err != nil {
				b.release(ctx, client, task.NodeName, held, podName)
				if errors.Is(err, nodelock.ErrHeld) {
					b.st.metrics.nodeLockBusy()
				}
				return err
			}
			held = append(held, key)
		}
	}
	var bindID string
	if len(turns) > 0 {
		// The next bind through these turns waits until this pod is
		// served, and must know a copy of the pod that reflects this bind
		// from an older one (agentBoundPod.served).
		bindID = newBindID()
		annotations = maps.Clone(annotations)
		annotations[AnnotationBindID] = bindID
	}
	binding := &v1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID, Annotations: annotations},
		Target:     v1.ObjectReference{Kind: "Node", Name: task.NodeName},
	}
	b.crash.beforeBind(task) // test-only, inert unless armed: a crash after the locks, before the bind
	err := client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if len(turns) > 0 && (err == nil || !definite(err)) {
		// Bound, or maybe bound: the next bind through these turns waits
		// for this pod (for an uncertain one, until the API server shows
		// it was not bound by this bind or that the agent served it).
		bound = &agentBoundPod{pod: podName, uid: pod.UID, bindID: bindID, uncertain: err != nil, pending: func(p *v1.Pod) bool {
			for _, k := range n.ordered {
				if k.pending(p) {
					return true
				}
			}
			return false
		}}
	}
	if err != nil {
		b.release(ctx, client, task.NodeName, held, podName)
		return fmt.Errorf("bind pod %s to node %s: %w", podName, task.NodeName, err)
	}
	b.crash.afterBind()
	klog.V(3).InfoS("Bound pod", "pod", podName, "node", task.NodeName, "noted", n != nil, "agentTurns", len(turns))
	return nil
}

// definite reports whether a failed bind request certainly did not bind the
// pod: the API server answered and refused it. Anything else (a timeout, a
// lost connection, a server error) may have bound it.
func definite(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) ||
		apierrors.IsForbidden(err) || apierrors.IsBadRequest(err) || apierrors.IsAlreadyExists(err) ||
		apierrors.IsUnauthorized(err) || apierrors.IsGone(err) || apierrors.IsMethodNotSupported(err)
}

// AnnotationBindID is set by the binder, on a pod whose node agent serves
// pods in order, to a random value new for every bind. A copy of the pod
// that carries it reflects that bind: the scheduler's informer may still
// hold an older copy, which Volcano itself edits in place (its session sets
// spec.nodeName on the cached pod when it allocates), so neither the node
// name nor a missing bind-phase tells a copy from before the bind.
const AnnotationBindID = "vshare.io/bind-id"

// newBindID returns a value for AnnotationBindID no pod author can guess.
func newBindID() string {
	var b [12]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err)) // never fails on Linux (getrandom)
	}
	return hex.EncodeToString(b[:])
}

// bindingAnnotations are the pod's annotations with the allocation's on
// top, as the API server will copy them onto the pod.
func bindingAnnotations(pod *v1.Pod, alloc map[string]string) map[string]string {
	out := make(map[string]string, len(pod.Annotations)+len(alloc))
	for k, v := range pod.Annotations {
		out[k] = v
	}
	for k, v := range alloc {
		out[k] = v
	}
	return out
}

func (b *Binder) release(ctx context.Context, client kubernetes.Interface, node string, keys []string, pod types.NamespacedName) {
	for _, key := range keys {
		if err := nodelock.Release(ctx, client, node, key, pod); err != nil {
			klog.ErrorS(err, "Failed to release node lock after a failed bind; it expires on its own",
				"node", node, "lock", key, "pod", pod)
		}
	}
}

// podGone says a lock's holder will never be served when the pod is
// deleted or has terminated (HAMi's scheduler checks for a deleted one).
func podGone(client kubernetes.Interface) nodelock.HolderGone {
	return func(ctx context.Context, holder types.NamespacedName) (bool, error) {
		p, err := client.CoreV1().Pods(holder.Namespace).Get(ctx, holder.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			return true, nil
		case err != nil:
			return false, err
		}
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed, nil
	}
}
