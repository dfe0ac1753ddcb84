package bind

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

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/volcano"
	"github.com/vgpushare/vshare/protocol/nodelock"
	"k8s.io/client-go/informers"
	"k8s.io/utils/clock"
)

// bindTimeout bounds one pod's lock-and-bind round trips.
const bindTimeout = 30 * time.Second

// Options are what a Binder is handed by the plugin.
type Options struct {
	// Clock stamps decisions and node locks; nil means the real clock.
	Clock clock.PassiveClock
	// Inventories tells whether a node's inventory changed since an
	// allocation was made on it (the plugin's node state); nil checks nothing.
	Inventories InventoryView
	// Metrics counts what binds did; nil members count nothing.
	Metrics Metrics
	// Decisions are shared with the plugin's node state, which accounts
	// the assumed ones; nil starts an empty record.
	Decisions *Decisions
}

// InventoryView is the one thing the binder reads of the plugin's node state:
// the generation of a node's decoded inventory of one device type.
type InventoryView interface {
	InventoryGen(node, backend string) (uint64, bool)
}

// Metrics are the binder's counters (the plugin registers them).
type Metrics struct {
	// NodeLockBusy counts a bind that found a node lock held.
	NodeLockBusy func()
	// AgentWaited counts a bind that waited for the node agent, with
	// "served" or "refused".
	AgentWaited func(result string)
	// InventoryRefused counts a bind refused for a stale inventory.
	InventoryRefused func()
}

// Binder binds pods the way Volcano's default binder does (a v1.Binding
// carrying the pod's annotations) and adds three things: the allocation
// annotations the session decided for the pod go on the binding, so the
// allocation travels with the bind; it takes the node lock right before the
// bind when deviceshare.NodeLockEnable asked for one, releasing it if the
// bind fails; and it refuses the bind of a pod whose device allocation
// failed in the session, so such a pod is retried instead of starting
// without its cards.
//
// It is Volcano's cache.Binder (the plugin checks it at compile time).
//
// TEST-ONLY, in binaries built with the vsharetest tag (the e2e
// framework's): with VSHARE_TEST_CRASH_AT_BIND (read once at start,
// crashhook.go) set, the process exits at a chosen Bind call or right before
// a chosen bind request, as the e2e fault campaign's
// scheduler-crash-mid-session fault; unset, the hook does nothing. Release
// builds have only the inert twin (crashhook_release.go).
type Binder struct {
	clock   clock.PassiveClock
	inv     InventoryView
	metrics Metrics
	// Decisions are the sessions' allocations, from the session to the
	// bind and, for the node state, until the informer shows the pod.
	Decisions *Decisions
	// turns serialise binds per node for device types whose node agent
	// serves pending pods in order (device.OrderedAgent).
	turns *agentTurns
	// crash is the TEST-ONLY crash hook (crashhook.go with the vsharetest
	// tag, crashhook_release.go without); nil, and inert, unless armed.
	crash *crashHook
	// podsOnce hands turns the scheduler's pod informer (FollowPods).
	podsOnce sync.Once
}

// New returns a Binder with no decision yet.
func New(opts Options) *Binder {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	m := opts.Metrics
	if m.NodeLockBusy == nil {
		m.NodeLockBusy = func() {}
	}
	if m.AgentWaited == nil {
		m.AgentWaited = func(string) {}
	}
	if m.InventoryRefused == nil {
		m.InventoryRefused = func() {}
	}
	if opts.Decisions == nil {
		opts.Decisions = NewDecisions(opts.Clock)
	}
	b := &Binder{clock: opts.Clock, inv: opts.Inventories, metrics: m, Decisions: opts.Decisions,
		turns: newAgentTurns(), crash: crashHookFromEnv()}
	b.turns.waited = m.AgentWaited
	return b
}

// FollowPods hands the agent turns the scheduler's pod informer, once: the
// scheduler cache's informer factory lives as long as the scheduler.
func (b *Binder) FollowPods(factory informers.SharedInformerFactory) {
	b.podsOnce.Do(func() {
		if w := newPodWatch(factory); w != nil {
			b.turns.pods.Store(w)
		}
	})
}

// Inherit gives the agent turns of the backends whose agents serve pods in
// order the pods the session shows still pending with them (see
// agentTurns.inherit), in the turns of their agent classes (classes, nil
// for none: one turn per node). Call it at session open.
func (b *Binder) Inherit(nodes map[string]*vcapi.NodeInfo, backends []device.Backend, classes ClassesFunc) {
	b.turns.inherit(nodes, allOrderedKeys(backends), classes)
}

// inventoryChanged returns an error when one of the node's inventories the
// allocation was made on has changed since: a card reported unhealthy,
// resized or cordoned after the session that chose it (read at a later
// session's open). The bind is refused and the pod placed again on what the
// node reports now. A bind that waited for the node agent is the common
// case: the wait may last agentWait.
func (b *Binder) inventoryChanged(node string, inv []InventoryStamp) error {
	if b.inv == nil {
		return nil
	}
	for _, s := range inv {
		if gen, ok := b.inv.InventoryGen(node, s.Backend); !ok || gen != s.Gen {
			return fmt.Errorf("node %s reported a new %s inventory (a card's health, size or cordon) after this allocation was made; "+
				"the pod is placed again on what the node reports now", node, s.Backend)
		}
	}
	return nil
}

// Claim is what a bind sends for a task: the annotations the API server
// copies onto the pod, and the decision they came from (nil when the
// session decided nothing for this task on its node).
type Claim struct {
	Annotations map[string]string
	Decision    *Decision
	// refused marks the session's own refusal (its error says why).
	refused bool
}

// Claim takes the task's decision for the bind and checks it: a refused
// allocation, or one made on an inventory the node has since replaced, is
// an error and nothing may be bound. A decision made for another node is
// stale and ignored.
func (b *Binder) Claim(task *vcapi.TaskInfo) (Claim, error) {
	d := b.Decisions.claim(task.Pod.UID)
	if d != nil && d.refused != nil {
		return Claim{refused: true}, fmt.Errorf("bind refused: %w", d.refused)
	}
	if d == nil || d.Node != task.NodeName {
		return Claim{Annotations: task.Pod.Annotations}, nil
	}
	if err := b.inventoryChanged(task.NodeName, d.Inventories); err != nil {
		b.metrics.InventoryRefused()
		return Claim{}, err
	}
	return Claim{Annotations: bindingAnnotations(task.Pod, d.Annotations), Decision: d}, nil
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
	pod := task.Pod
	podName := types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}
	c, err := b.Claim(task)
	switch {
	case err != nil && c.refused:
		return err
	case err != nil:
		return fmt.Errorf("bind pod %s to node %s: %w", podName, task.NodeName, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), bindTimeout)
	defer cancel()
	annotations, n := c.Annotations, c.Decision
	var turns heldTurns
	if n != nil {
		var err error
		if turns, err = b.turns.acquire(ctx, client, task.NodeName, pod.UID, n.Ordered); err != nil {
			return fmt.Errorf("bind pod %s to node %s: %w", podName, task.NodeName, err)
		}
	}
	var bound *agentBoundPod
	defer func() { turns.release(bound) }()
	if n != nil && len(turns) > 0 {
		// The wait for the node agent may have lasted agentWait: check the
		// inventory again.
		if err := b.inventoryChanged(task.NodeName, n.Inventories); err != nil {
			b.metrics.InventoryRefused()
			return fmt.Errorf("bind pod %s to node %s: %w", podName, task.NodeName, err)
		}
	}
	var held []string
	if n != nil && n.Locks != nil {
		for _, key := range n.Locks.Keys {
			var err error
			if slices.Contains(n.Locks.Agent, key) {
				err = nodelock.AcquireOrTakeOver(ctx, client, task.NodeName, key, podName, b.clock.Now(), n.Locks.TTL, podGone(client))
			} else {
				err = nodelock.Acquire(ctx, client, task.NodeName, key, podName, b.clock.Now(), n.Locks.TTL)
			}
			if err != nil {
				b.release(ctx, client, task.NodeName, held, podName)
				if errors.Is(err, nodelock.ErrHeld) {
					b.metrics.NodeLockBusy()
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
	err = client.CoreV1().Pods(pod.Namespace).Bind(ctx, binding, metav1.CreateOptions{})
	if len(turns) > 0 && (err == nil || !definite(err)) {
		// Bound, or maybe bound: the next bind through these turns waits
		// for this pod (for an uncertain one, until the API server shows
		// it was not bound by this bind or that the agent served it).
		bound = &agentBoundPod{pod: podName, uid: pod.UID, bindID: bindID, uncertain: err != nil, pending: func(p *v1.Pod) bool {
			for _, k := range n.Ordered {
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
