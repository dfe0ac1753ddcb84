//go:build e2e

package framework

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
)

// injector injects the campaign's faults. Its random source is used only by
// run's goroutine: every random choice of a fault, delays included, is made
// there, so a seed gives the same sequence of choices.
type injector struct {
	c    *Cluster
	a    *Auditor
	opts *CampaignOptions
	spec SchedulerSpec
	r    *rand.Rand
	wg   sync.WaitGroup

	mu     sync.Mutex
	counts map[FaultKind]int
	notes  map[string]int
	// busy marks nodes with an agent, kubelet or card fault in progress.
	busy map[string]bool
	kept int
}

func newInjector(c *Cluster, a *Auditor, opts *CampaignOptions, spec SchedulerSpec, r *rand.Rand) *injector {
	inj := &injector{c: c, a: a, opts: opts, spec: spec, r: r,
		counts: map[FaultKind]int{}, notes: map[string]int{}, busy: map[string]bool{}}
	return inj
}

// run injects a fault about every FaultEvery until ctx ends, then waits for
// the faults still in progress (agents being restarted).
func (inj *injector) run(ctx context.Context) {
	defer inj.wg.Wait()
	for {
		wait := time.Duration(float64(inj.opts.FaultEvery) * (0.5 + inj.r.Float64()))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		kind := inj.opts.Faults[inj.r.IntN(len(inj.opts.Faults))]
		if err := inj.inject(ctx, kind); err != nil {
			fmt.Fprintf(inj.opts.Log, "faults: %s: %v\n", kind, err)
			inj.note(string(kind) + " failed")
		}
	}
}

func (inj *injector) inject(ctx context.Context, kind FaultKind) error {
	switch kind {
	case FaultSchedulerKill:
		return inj.killScheduler(ctx)
	case FaultAgentKill:
		inj.killAgentInAllocate(ctx)
	case FaultBoundPodDelete:
		inj.deleteBeforeAllocate(ctx)
	case FaultPendingPodDelete:
		return inj.deletePending(ctx)
	case FaultKubeletSocket:
		return inj.recreateSocket(ctx)
	case FaultCardUnhealthy:
		return inj.cardUnhealthy(ctx)
	case FaultSchedulerCrash:
		return inj.crashMidSession(ctx)
	}
	return nil
}

func (inj *injector) count(kind FaultKind) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	inj.counts[kind]++
}

func (inj *injector) note(what string) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	inj.notes[what]++
}

// report copies the counts into the report.
func (inj *injector) report(rep *CampaignReport) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	for k, v := range inj.counts {
		rep.Faults[k] = v
	}
	for k, v := range inj.notes {
		rep.Notes[k] = v
	}
	rep.KeptAcrossRestarts = inj.kept
}

// killScheduler kills the scheduler (SIGKILL), starts a new one after up to
// 1.5 s, and 5 s later checks that every pod bound before kept its node and
// allocation.
func (inj *injector) killScheduler(ctx context.Context) error {
	pause := time.Duration(inj.r.IntN(1500)) * time.Millisecond
	snap := inj.a.SnapshotBound()
	inj.c.KillScheduler()
	inj.count(FaultSchedulerKill)
	select {
	case <-ctx.Done():
	case <-time.After(pause):
	}
	return inj.restartAndCheckKept(ctx, snap)
}

// restartAndCheckKept starts the scheduler again (three tries) and, 5 s
// later, checks that every pod of snap (bound before the scheduler went)
// kept its node and allocation.
func (inj *injector) restartAndCheckKept(ctx context.Context, snap map[types.UID]boundAlloc) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		// Not ctx: the campaign must end with a scheduler running.
		if err = inj.c.StartSchedulerWith(context.WithoutCancel(ctx), inj.spec); err == nil {
			break
		}
		inj.c.KillScheduler()
	}
	if err != nil {
		return fmt.Errorf("start the scheduler again: %w", err)
	}
	inj.wg.Add(1)
	go func() {
		defer inj.wg.Done()
		time.Sleep(5 * time.Second) // a fixed delay: let the new scheduler's first sessions run
		kept := inj.a.CheckKept(snap)
		inj.mu.Lock()
		inj.kept += kept
		inj.mu.Unlock()
	}()
	return nil
}

// takeNode picks a vGPU node with no fault in progress and marks it busy.
func (inj *injector) takeNode() *GPUNode {
	var free []*GPUNode
	inj.mu.Lock()
	for _, n := range inj.c.Nodes() {
		if n.VGPU() && !inj.busy[n.Name] {
			free = append(free, n)
		}
	}
	inj.mu.Unlock()
	if len(free) == 0 {
		return nil
	}
	n := free[inj.r.IntN(len(free))]
	inj.mu.Lock()
	inj.busy[n.Name] = true
	inj.mu.Unlock()
	return n
}

func (inj *injector) release(n *GPUNode) {
	inj.mu.Lock()
	defer inj.mu.Unlock()
	delete(inj.busy, n.Name)
}

// killAgentInAllocate arms the node's kubelet to kill the agent when it
// next calls Allocate: right before the call (the call then fails) or
// 0-20 ms into it (the agent may die before, during or after it wrote the
// allocation). The agent is started again 0.5-3 s after it died.
func (inj *injector) killAgentInAllocate(ctx context.Context) {
	n := inj.takeNode()
	if n == nil {
		inj.note("agent-kill skipped: every node busy")
		return
	}
	during := inj.r.IntN(2) == 1
	delay := time.Duration(inj.r.IntN(20)) * time.Millisecond
	down := 500*time.Millisecond + time.Duration(inj.r.IntN(2500))*time.Millisecond
	killed := make(chan types.UID, 1)
	var once sync.Once
	n.Kubelet.SetBeforeAllocate(func(uid types.UID) {
		once.Do(func() {
			n.Kubelet.SetBeforeAllocate(nil)
			if during {
				go func() { time.Sleep(delay); n.KillAgent(); killed <- uid }() // an injected delay, not a wait
				return
			}
			n.KillAgent()
			killed <- uid
		})
	})
	inj.wg.Add(1)
	go func() {
		defer inj.wg.Done()
		defer inj.release(n)
		select {
		case <-killed:
		case <-time.After(15 * time.Second):
			n.Kubelet.SetBeforeAllocate(nil)
			inj.note("agent-kill not triggered: no Allocate within 15s")
			return
		case <-ctx.Done():
			n.Kubelet.SetBeforeAllocate(nil)
			return
		}
		inj.count(FaultAgentKill)
		inj.note(map[bool]string{false: "agent-kill before Allocate", true: "agent-kill during Allocate"}[during])
		time.Sleep(down) // the agent stays down this long on purpose
		inj.restartAgent(context.WithoutCancel(ctx), n)
	}()
}

// restartAgent starts the node's agent again, retrying a failed start.
func (inj *injector) restartAgent(ctx context.Context, n *GPUNode) {
	for attempt := 0; attempt < 3; attempt++ {
		n.KillAgent()
		err := inj.c.restartFaultAgent(ctx, n)
		if err == nil {
			return
		}
		fmt.Fprintf(inj.opts.Log, "faults: restart agent of %s: %v\n", n.Name, err)
	}
	inj.a.flag(ViolationFault, n.Name, "the agent did not start again in three attempts")
}

// deleteBeforeAllocate arms a node's kubelet to delete the next pod it
// admits, bound but not yet served by the agent, before it calls Allocate:
// the bind the scheduler assumed fails after the fact (the kubelet, holding
// the pod, goes on with the admission, which the agent must refuse, then
// lets the pod go), and with NodeLockEnable the pod's node lock is never
// released by an agent and must expire.
func (inj *injector) deleteBeforeAllocate(ctx context.Context) {
	n := inj.takeNode()
	if n == nil {
		inj.note("delete-bound-pod skipped: every node busy")
		return
	}
	hit := make(chan struct{}, 1)
	var once sync.Once
	n.Kubelet.SetBeforeAllocate(func(uid types.UID) {
		once.Do(func() {
			n.Kubelet.SetBeforeAllocate(nil)
			if pod := inj.a.podByUID(uid); pod != nil && inj.deleteAndWait(ctx, pod) {
				hit <- struct{}{}
			}
		})
	})
	inj.wg.Add(1)
	go func() {
		defer inj.wg.Done()
		defer inj.release(n)
		select {
		case <-hit:
			inj.count(FaultBoundPodDelete)
		case <-time.After(15 * time.Second):
			n.Kubelet.SetBeforeAllocate(nil)
			inj.note("delete-bound-pod not triggered: no Allocate within 15s")
		case <-ctx.Done():
			n.Kubelet.SetBeforeAllocate(nil)
		}
	}()
}

// deleteAndWait deletes the pod and waits up to 10 s until the deletion is
// visible (the kubelet holds the pod until it is done with it).
func (inj *injector) deleteAndWait(ctx context.Context, pod *v1.Pod) bool {
	pods := inj.c.Kube.CoreV1().Pods(pod.Namespace)
	err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}})
	if err != nil {
		return false
	}
	err = wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		cur, err := pods.Get(ctx, pod.Name, metav1.GetOptions{})
		return apierrors.IsNotFound(err) || (err == nil && (cur.UID != pod.UID || cur.DeletionTimestamp != nil)), nil
	})
	return err == nil
}

// deletePending deletes a random pending, unbound campaign pod.
func (inj *injector) deletePending(ctx context.Context) error {
	var pending []*v1.Pod
	for _, obj := range inj.a.pods.List() {
		p := obj.(*v1.Pod)
		if p.Namespace == inj.opts.Namespace && p.Spec.NodeName == "" && p.DeletionTimestamp == nil && p.Status.Phase == v1.PodPending {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		inj.note("delete-pending-pod skipped: none pending")
		return nil
	}
	p := pending[inj.r.IntN(len(pending))]
	err := inj.c.Kube.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}})
	if err != nil {
		return fmt.Errorf("delete pending pod %s: %w", p.Name, err)
	}
	inj.count(FaultPendingPodDelete)
	return nil
}

// recreateSocket recreates a node's kubelet.sock and checks that the agent
// registers again within 20 s.
func (inj *injector) recreateSocket(ctx context.Context) error {
	n := inj.takeNode()
	if n == nil {
		inj.note("kubelet-socket skipped: every node busy")
		return nil
	}
	regs := n.Kubelet.Registrations()
	if err := n.Kubelet.RecreateSocket(); err != nil {
		inj.release(n)
		return err
	}
	inj.count(FaultKubeletSocket)
	inj.wg.Add(1)
	go func() {
		defer inj.wg.Done()
		defer inj.release(n)
		err := wait.PollUntilContextTimeout(context.WithoutCancel(ctx), 100*time.Millisecond, 20*time.Second, true, func(context.Context) (bool, error) {
			return n.Kubelet.Registrations() > regs, nil
		})
		if err != nil {
			inj.a.flag(ViolationFault, n.Name+" kubelet.sock", "the agent did not register again within 20s of the kubelet socket being recreated")
		}
	}()
	return nil
}

// cardUnhealthy injects a critical error on a random card and checks that
// the node reports the card unhealthy within 10 s and healthy again within
// FaultHealthRecovery + 20 s.
func (inj *injector) cardUnhealthy(ctx context.Context) error {
	n := inj.takeNode()
	if n == nil {
		inj.note("card-unhealthy skipped: every node busy")
		return nil
	}
	node, err := inj.c.Kube.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
	if err != nil {
		inj.release(n)
		return fmt.Errorf("get node %s: %w", n.Name, err)
	}
	var uuids []string
	for uuid := range registeredCards(node) {
		uuids = append(uuids, uuid)
	}
	if len(uuids) == 0 {
		inj.release(n)
		return fmt.Errorf("node %s registers no card", n.Name)
	}
	sort.Strings(uuids) // map order would make the seed's choice random
	uuid := uuids[inj.r.IntN(len(uuids))]
	kind := pick(inj.r, "xid 79", "xid 48", "ecc")
	if err := n.InjectNVMLEvent(uuid, kind); err != nil {
		inj.release(n)
		return err
	}
	inj.count(FaultCardUnhealthy)
	inj.wg.Add(1)
	go func() {
		defer inj.wg.Done()
		defer inj.release(n)
		inj.followHealth(context.WithoutCancel(ctx), n.Name, uuid)
	}()
	return nil
}

// followHealth waits for the card to be reported unhealthy, then healthy.
func (inj *injector) followHealth(ctx context.Context, node, uuid string) {
	healthy := func(want bool) func(context.Context) (bool, error) {
		return func(ctx context.Context) (bool, error) {
			n, err := inj.c.Kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
			if err != nil {
				return false, nil
			}
			cp, ok := registeredCards(n)[uuid]
			return ok && cp.healthy == want, nil
		}
	}
	subject := node + "/" + uuid
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 10*time.Second, true, healthy(false)); err != nil {
		inj.a.flag(ViolationFault, subject, "an injected critical error did not make the card unhealthy in the node's registration within 10s")
		return
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, FaultHealthRecovery+20*time.Second, true, healthy(true)); err != nil {
		inj.a.flag(ViolationFault, subject, fmt.Sprintf("the card was not healthy again within %s of being reported unhealthy", FaultHealthRecovery+20*time.Second))
	}
}

// heal ends every fault: agents running, the scheduler running, no kubelet
// hook, and every card healthy.
func (inj *injector) heal(ctx context.Context) error {
	for _, n := range inj.c.Nodes() {
		if !n.VGPU() {
			continue
		}
		n.Kubelet.SetBeforeAllocate(nil)
		if !n.AgentAlive() {
			if err := inj.c.restartFaultAgent(ctx, n); err != nil {
				return fmt.Errorf("heal: %w", err)
			}
		}
	}
	if !inj.c.SchedulerRunning() {
		inj.c.KillScheduler()
		if err := inj.c.StartSchedulerWith(ctx, inj.spec); err != nil {
			return fmt.Errorf("heal: %w", err)
		}
	}
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, FaultHealthRecovery+time.Minute, true, func(ctx context.Context) (bool, error) {
		nodes, err := inj.c.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, n := range nodes.Items {
			for _, cp := range registeredCards(&n) {
				if !cp.healthy {
					return false, nil
				}
			}
		}
		return true, nil
	})
}
