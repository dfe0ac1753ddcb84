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
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
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
	pod     types.NamespacedName
	uid     types.UID
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
// served), or is gone, for at most the turns' wait.
func (a *agentTurns) waitServed(ctx context.Context, client kubernetes.Interface, node string, p *agentBoundPod) error {
	ctx, cancel := context.WithTimeout(ctx, a.wait)
	defer cancel()
	if w := a.pods.Load(); w != nil {
		if done, err := a.waitInformer(ctx, w, node, p); done {
			return err
		}
	}
	pods := client.CoreV1().Pods(p.pod.Namespace)
	cur, err := pods.Get(ctx, p.pod.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("node %s: read pod %s, bound before and maybe still waiting for the node agent: %w", node, p.pod, err)
	}
	if p.served(cur) {
		klog.V(3).InfoS("Previous pod already served", "node", node, "pod", p.pod, "uid", cur.UID, "deleting", cur.DeletionTimestamp != nil)
		return nil
	}
	w, err := pods.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", p.pod.Name).String(),
		ResourceVersion: cur.ResourceVersion,
	})
	if err != nil {
		return fmt.Errorf("node %s: watch pod %s, bound before and still waiting for the node agent: %w", node, p.pod, err)
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return a.stillPending(node, p)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return fmt.Errorf("node %s: watch of pod %s ended while it still waits for the node agent", node, p.pod)
			}
			switch ev.Type {
			case watch.Deleted:
				if pod, ok := ev.Object.(*v1.Pod); ok && pod.Name == p.pod.Name {
					return nil
				}
			case watch.Added, watch.Modified:
				if pod, ok := ev.Object.(*v1.Pod); ok && pod.Name == p.pod.Name && p.served(pod) {
					klog.V(3).InfoS("Previous pod served", "node", node, "pod", p.pod)
					return nil
				}
			case watch.Error:
				return fmt.Errorf("node %s: watch of pod %s: %v", node, p.pod, apierrors.FromObject(ev.Object))
			}
		}
	}
}

// waitInformer is waitServed through the scheduler's pod informer; done is
// false when the informer does not have the pod, for the API server to say
// whether it is gone.
func (a *agentTurns) waitInformer(ctx context.Context, w *podWatch, node string, p *agentBoundPod) (done bool, err error) {
	for {
		next, stop := w.next(p.pod)
		cur, ok := w.get(p.pod)
		if !ok {
			stop()
			return false, nil
		}
		if p.served(cur) {
			stop()
			klog.V(3).InfoS("Previous pod served", "node", node, "pod", p.pod, "uid", cur.UID, "deleting", cur.DeletionTimestamp != nil)
			return true, nil
		}
		select {
		case <-next:
		case <-ctx.Done():
			stop()
			return true, a.stillPending(node, p)
		}
	}
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
func (p *agentBoundPod) served(cur *v1.Pod) bool {
	terminated := cur.Status.Phase == v1.PodSucceeded || cur.Status.Phase == v1.PodFailed
	return cur.UID != p.uid || terminated || !p.pending(cur)
}
