package deviceshare

import (
	"context"
	"fmt"
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

	"github.com/vgpushare/vshare/deviceshare/api"
)

// agentWait bounds how long a bind waits for the node agent to serve the
// previous pod bound to the same node and device type. Past it the bind is
// refused and the pod is scheduled again in a later session.
const agentWait = 10 * time.Second

// orderedKey names one device type, whose node agent serves pods in order
// (api.OrderedAgent), for the binder.
type orderedKey struct {
	backend string
	pending func(*v1.Pod) bool
}

func orderedKeys(backends []api.Backend, idx []int) []orderedKey {
	var out []orderedKey
	for _, i := range idx {
		if a, ok := backends[i].(api.OrderedAgent); ok {
			out = append(out, orderedKey{backend: backends[i].Name(), pending: a.AgentPending})
		}
	}
	return out
}

// agentTurns serialises binds per node and ordered device type: a bind
// takes the turn of each (node, device type) it allocates, waits until the
// pod bound last through that turn is no longer pending with the node agent,
// binds, and records itself as the pod to wait for. Binds to other nodes
// and of other device types proceed in parallel.
type agentTurns struct {
	mu    sync.Mutex
	turns map[string]*agentTurn
	wait  time.Duration
	// pods, when set, is the scheduler's pod informer, read instead of the
	// API server while the pod is there.
	pods atomic.Pointer[podWatch]
	// waited is called after each wait with "served" or "refused".
	waited func(result string)
}

type agentTurn struct {
	// sem is a one-slot semaphore held from the wait through the bind.
	sem chan struct{}
	// last is the pod bound last through this turn, nil once it was seen
	// served.
	last *agentBoundPod
}

type agentBoundPod struct {
	pod types.NamespacedName
	uid types.UID
	// bindID is the pod's AnnotationBindID from this bind: a copy without
	// it predates the bind.
	bindID  string
	pending func(*v1.Pod) bool
}

func newAgentTurns() *agentTurns {
	return &agentTurns{turns: make(map[string]*agentTurn), wait: agentWait, waited: func(string) {}}
}

// heldTurns are the turns one bind holds, in a fixed order.
type heldTurns []*agentTurn

// acquire takes the turns of keys on node, in name order (so two binds never
// wait for each other crosswise), and waits for the node agent to serve the
// pods bound last through them. On error nothing is held.
func (a *agentTurns) acquire(ctx context.Context, client kubernetes.Interface, node string, keys []orderedKey) (heldTurns, error) {
	if len(keys) == 0 {
		return nil, nil
	}
	names := make([]string, 0, len(keys))
	for _, k := range keys {
		names = append(names, node+"\x00"+k.backend)
	}
	sort.Strings(names)
	var held heldTurns
	for _, name := range names {
		a.mu.Lock()
		t := a.turns[name]
		if t == nil {
			t = &agentTurn{sem: make(chan struct{}, 1)}
			a.turns[name] = t
		}
		a.mu.Unlock()
		select {
		case t.sem <- struct{}{}:
			held = append(held, t)
		case <-ctx.Done():
			held.release(nil)
			return nil, fmt.Errorf("node %s: waiting for an earlier bind to the same node: %w", node, ctx.Err())
		}
	}
	for _, t := range held {
		if t.last == nil {
			continue
		}
		klog.V(3).InfoS("Waiting for the node agent to serve the pod bound before", "node", node, "previous", t.last.pod)
		if err := a.waitServed(ctx, client, node, t.last); err != nil {
			a.waited("refused")
			held.release(nil)
			return nil, err
		}
		a.waited("served")
		t.last = nil
	}
	return held, nil
}

// release gives the turns back; bound, when not nil, is the pod just bound,
// which the next bind through these turns waits for.
func (h heldTurns) release(bound *agentBoundPod) {
	for _, t := range h {
		if bound != nil {
			t.last = bound
		}
		<-t.sem
	}
}

// waitServed waits until p is no longer pending with the node agent (see
// served), or is gone, for at most the turns' wait. It reads the pod from
// the scheduler's pod informer (podWatch) and wakes on that pod's events;
// only a pod the informer does not have is read from the API server (gone,
// or not seen yet). Without an informer (tests, or a scheduler whose
// informer would not take a handler) it reads the API server every
// pollServed.
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
		if w == nil {
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
	if w != nil {
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
func (p *agentBoundPod) served(cur *v1.Pod) bool {
	if cur.UID != p.uid {
		return true
	}
	if cur.Annotations[AnnotationBindID] != p.bindID {
		return false
	}
	terminated := cur.Status.Phase == v1.PodSucceeded || cur.Status.Phase == v1.PodFailed
	return terminated || !p.pending(cur)
}
