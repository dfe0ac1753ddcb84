package bind

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/device"
)

// agentWait bounds how long a bind waits for the node agent to serve the
// previous pod bound to the same node and device type. Past it the bind is
// refused and the pod is scheduled again in a later session.
const agentWait = 10 * time.Second

// OrderedKey names one device type, whose node agent serves pods in order
// (device.OrderedAgent), for the binder, and, for one pod, the classes of
// requests through which that agent could serve it (device.AgentClasser).
type OrderedKey struct {
	backend string
	pending func(*v1.Pod) bool
	// classes are the pod's agent classes; nil: the pod may be confused
	// with any pod pending on the node (one turn per node).
	classes []string
}

// Backend names k's device type.
func (k OrderedKey) Backend() string { return k.backend }

// Classes are the pod's agent classes k holds (nil: the node's one turn).
func (k OrderedKey) Classes() []string { return k.classes }

// WithClasses returns k for a pod whose allocation falls in the agent
// classes (device.AgentClasser); the bind waits only for pods pending in
// one of them.
func (k OrderedKey) WithClasses(classes []string) OrderedKey {
	k.classes = slices.Clone(classes)
	return k
}

// turnNames are the turns of k on node: one per class, or the node's one.
func (k OrderedKey) turnNames(node string) []string {
	base := node + "\x00" + k.backend
	if len(k.classes) == 0 {
		return []string{base}
	}
	out := make([]string, len(k.classes))
	for i, c := range k.classes {
		out[i] = base + "\x00" + c
	}
	return out
}

// ClassesFunc returns a pending pod's agent classes for the device type
// backend on node (device.AgentClasser), or nil when it has none.
type ClassesFunc func(node, backend string, pod *v1.Pod) []string

// allOrderedKeys returns the ordered device types among backends.
func allOrderedKeys(backends []device.Backend) []OrderedKey {
	idx := make([]int, len(backends))
	for i := range idx {
		idx[i] = i
	}
	return OrderedKeys(backends, idx)
}

// OrderedKeys returns the ordered device types among backends[idx...].
func OrderedKeys(backends []device.Backend, idx []int) []OrderedKey {
	var out []OrderedKey
	for _, i := range idx {
		if a, ok := backends[i].(device.OrderedAgent); ok {
			out = append(out, OrderedKey{backend: backends[i].Name(), pending: a.AgentPending})
		}
	}
	return out
}

// agentTurns serialises binds per node, ordered device type and agent
// class: a bind takes the turn of each (node, device type, class) it
// allocates in, waits until the pod bound last through that turn is no
// longer pending with the node agent, binds, and records itself as the pod
// to wait for. Binds to other nodes, of other device types and, for an
// agent that tells them apart (device.AgentClasser), in other classes
// proceed in parallel: their pods are pending with the agent together,
// which never serves one of them another's allocation.
type agentTurns struct {
	mu    sync.Mutex
	turns map[string]*agentTurn
	wait  time.Duration
	// pods, when set, is the scheduler's pod informer, read instead of the
	// API server while the pod is there.
	pods atomic.Pointer[podWatch]
	// waited is called after each wait with "served" or "refused".
	waited func(result string)
	// inherited are the device types whose pending pods inherit handed
	// to the turns.
	inherited map[string]bool
}

type agentTurn struct {
	// sem is a one-slot semaphore held from the wait through the bind.
	sem chan struct{}
	// waitFor are the pods the next bind through this turn waits for: the
	// pod bound last through it, and pods found pending with the agent when
	// the process began (inherit); each leaves once seen served.
	waitFor []*agentBoundPod
}

type agentBoundPod struct {
	pod types.NamespacedName
	uid types.UID
	// bindID is the pod's AnnotationBindID from this bind: a copy without
	// it predates the bind.
	bindID  string
	pending func(*v1.Pod) bool
	// uncertain marks a bind whose request failed without a definite
	// answer (a timeout, a lost connection): the pod may or may not be
	// bound, so it is read from the API server (check), not the informer.
	uncertain bool
}

func newAgentTurns() *agentTurns {
	return &agentTurns{turns: make(map[string]*agentTurn), wait: agentWait, waited: func(string) {},
		inherited: make(map[string]bool)}
}

// turn returns the turn of name, creating it. Call with a.mu held.
func (a *agentTurns) turn(name string) *agentTurn {
	t := a.turns[name]
	if t == nil {
		t = &agentTurn{sem: make(chan struct{}, 1)}
		a.turns[name] = t
	}
	return t
}

// inherit gives the turns of each ordered device type not inherited before
// the pods the session shows on a node still pending with that type's
// agent. They were bound before this process had turn state for them: by a
// scheduler process that crashed or restarted in the middle of a burst (or
// before this device type was enabled). Without them the first bind to such
// a node would not wait, the node would have two pods pending with its
// agent, and the agent, which answers each admission with the oldest
// pending pod's allocation, could hand one pod the other's cards when the
// kubelet admits them out of order. Call it at session open, before the
// session's binds; a type is inherited once per process, since later binds
// of it go through its turns.
func (a *agentTurns) inherit(nodes map[string]*vcapi.NodeInfo, keys []OrderedKey, classes ClassesFunc) {
	a.mu.Lock()
	var fresh []OrderedKey
	for _, k := range keys {
		if !a.inherited[k.backend] {
			a.inherited[k.backend] = true
			fresh = append(fresh, k)
		}
	}
	a.mu.Unlock()
	if len(fresh) == 0 {
		return
	}
	found := 0
	for name, node := range nodes {
		for _, task := range node.Tasks {
			pod := task.Pod
			if pod == nil || pod.Spec.NodeName != name || pod.Status.Phase == v1.PodSucceeded || pod.Status.Phase == v1.PodFailed {
				continue
			}
			for _, k := range fresh {
				if !k.pending(pod) {
					continue
				}
				p := &agentBoundPod{pod: types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name}, uid: pod.UID,
					bindID: pod.Annotations[AnnotationBindID], pending: k.pending}
				if classes != nil {
					k = k.WithClasses(classes(name, k.backend, pod))
				}
				a.mu.Lock()
				for _, tn := range k.turnNames(name) {
					t := a.turn(tn)
					t.waitFor = append(t.waitFor, p)
				}
				a.mu.Unlock()
				found++
				klog.V(2).InfoS("Pod bound before this scheduler process still waits for its node agent; the next bind to its node waits for it",
					"pod", p.pod, "node", name, "device", k.backend)
			}
		}
	}
	if found > 0 {
		klog.InfoS("Found pods bound earlier and still pending with their node agents", "pods", found)
	}
}

// heldTurns are the turns one bind holds, in a fixed order.
type heldTurns []*agentTurn

// acquire takes the turns of keys on node, in name order (so two binds never
// wait for each other crosswise), and waits for the node agent to serve the
// pods the turns wait for, except self (the pod about to be bound, whose
// earlier bind may have ended without an answer). On error nothing is held.
func (a *agentTurns) acquire(ctx context.Context, client kubernetes.Interface, node string, self types.UID, keys []OrderedKey) (heldTurns, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	var names []string
	for _, k := range keys {
		names = append(names, k.turnNames(node)...)
	}
	sort.Strings(names)
	names = slices.Compact(names)
	var held heldTurns
	for _, name := range names {
		a.mu.Lock()
		t := a.turn(name)
		a.mu.Unlock()
		select {
		case t.sem <- struct{}{}:
			held = append(held, t)
		case <-ctx.Done():
			held.release(nil)
			return nil, fmt.Errorf("node %s: waiting for an earlier bind to the same node: %w", node, ctx.Err())
		}
	}
	// A pod bound through several turns (its classes) is in each of them:
	// wait for it, and count the wait, once.
	served := make(map[*agentBoundPod]bool)
	for _, t := range held {
		// t.waitFor is read and written only by the holder of t.sem
		// (inherit runs at session open, before the session's binds).
		var left []*agentBoundPod
		for i, p := range t.waitFor {
			if p.uid == self {
				left = append(left, p)
				continue
			}
			if served[p] {
				continue
			}
			klog.V(3).InfoS("Waiting for the node agent to serve the pod bound before", "node", node, "previous", p.pod)
			if err := a.waitServed(ctx, client, node, p); err != nil {
				a.waited("refused")
				t.waitFor = append(left, t.waitFor[i:]...)
				held.release(nil)
				return nil, err
			}
			a.waited("served")
			served[p] = true
		}
		t.waitFor = left
	}
	return held, nil
}

// release gives the turns back; bound, when not nil, is the pod just bound
// (or maybe bound), which the next bind through these turns waits for in
// place of any earlier entry of the same pod.
func (h heldTurns) release(bound *agentBoundPod) {
	for _, t := range h {
		if bound != nil {
			t.waitFor = slices.DeleteFunc(t.waitFor, func(p *agentBoundPod) bool { return p.uid == bound.uid })
			t.waitFor = append(t.waitFor, bound)
		}
		<-t.sem
	}
}

// waitServed waits until p is no longer pending with the node agent (see
// served), or is gone, for at most the turns' wait. It reads the pod from
// the scheduler's pod informer (podWatch) and wakes on that pod's events;
// only a pod the informer does not have is read from the API server (gone,
// or not seen yet). Without an informer (tests, or a scheduler whose
// informer would not take a handler), and for an uncertain bind, it reads
// the API server every pollServed (and at the pod's informer events).
func (a *agentTurns) waitServed(ctx context.Context, client kubernetes.Interface, node string, p *agentBoundPod) error {
	ctx, cancel := context.WithTimeout(ctx, a.wait)
	defer cancel()
	w := a.pods.Load()
	for {
		var next <-chan struct{}
		stop := func() {}
		if w != nil {
			next, stop = w.next(p.pod)
		}
		served, err := a.check(ctx, client, w, node, p)
		if served || err != nil {
			stop()
			return err
		}
		var poll <-chan time.Time
		if w == nil || p.uncertain {
			t := time.NewTimer(pollServed)
			poll = t.C
			stop = func() { t.Stop() }
		}
		select {
		case <-next:
		case <-poll:
		case <-ctx.Done():
			stop()
			return a.stillPending(node, p)
		}
		stop()
	}
}

// pollServed is how often waitServed reads the pod without an informer.
const pollServed = 100 * time.Millisecond

// check reports whether p is served, from the informer's copy when it has
// one, else from the API server (a pod that is not found is gone).
func (a *agentTurns) check(ctx context.Context, client kubernetes.Interface, w *podWatch, node string, p *agentBoundPod) (bool, error) {
	cur, ok := (*v1.Pod)(nil), false
	if w != nil && !p.uncertain {
		cur, ok = w.get(p.pod)
	}
	if !ok {
		got, err := client.CoreV1().Pods(p.pod.Namespace).Get(ctx, p.pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			if ctx.Err() != nil {
				return false, a.stillPending(node, p)
			}
			return false, fmt.Errorf("node %s: read pod %s, bound before and maybe still waiting for the node agent: %w", node, p.pod, err)
		}
		cur = got
	}
	if p.served(cur) {
		klog.V(3).InfoS("Previous pod served", "node", node, "pod", p.pod, "uid", cur.UID, "deleting", cur.DeletionTimestamp != nil)
		return true, nil
	}
	return false, nil
}

// stillPending is the error of a wait that ran out.
func (a *agentTurns) stillPending(node string, p *agentBoundPod) error {
	return fmt.Errorf("node %s: pod %s, bound before, still waits for the node agent after %s; "+
		"the agent serves one pending pod per node at a time, so this pod is bound later", node, p.pod, a.wait)
}

// served reports whether cur no longer needs the node agent: replaced by
// another pod of the same name, terminated (the kubelet failed it and will
// not ask for it again), or served. A pod being deleted still counts as
// pending until it is gone: the kubelet may be admitting it right then, and
// the agent, which skips pods being deleted, would answer that admission
// with the next pod's allocation if the next pod were already bound (found
// by the e2e fault campaign, deleting pods right after their bind).
//
// A copy of the pod without this bind's AnnotationBindID predates the bind
// and says nothing: before the bind the pod has none of the annotations
// pending reads, so it would look served, and the next pod bound at once
// would have its allocation swapped with this one's (found by the e2e
// placement tests under load when the wait moved to the scheduler's
// informer, whose copy Volcano edits in place).
//
// An uncertain bind's pod is read from the API server, whose copy nobody
// edits in place: without this bind's ID it was not bound by this bind,
// which then leaves nothing pending.
func (p *agentBoundPod) served(cur *v1.Pod) bool {
	if cur.UID != p.uid {
		return true
	}
	if cur.Annotations[AnnotationBindID] != p.bindID {
		return p.uncertain
	}
	terminated := cur.Status.Phase == v1.PodSucceeded || cur.Status.Phase == v1.PodFailed
	return terminated || !p.pending(cur)
}
