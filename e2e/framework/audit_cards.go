//go:build e2e

package framework

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// CoresPerCard is a card's SM share: 100 percent.
const CoresPerCard = 100

// Violation is one broken invariant, with the evidence of its first sighting.
type Violation struct {
	// Kind names the invariant (see the Auditor's documentation).
	Kind string
	// Subject is what broke it (a card, a pod, a node).
	Subject string
	// First is when it was first seen; Seen counts the samples it was seen in.
	First time.Time
	Seen  int
	// Evidence describes the state that broke it.
	Evidence string
}

func (v Violation) String() string {
	return fmt.Sprintf("%s %s (first at %s, seen %d times): %s", v.Kind, v.Subject, v.First.Format("15:04:05.000"), v.Seen, v.Evidence)
}

// Kinds of violations.
const (
	// ViolationOvercommit: a card holds more memory, cores or sharers than
	// it has, by the allocation annotations of live pods.
	ViolationOvercommit = "overcommit-annotations"
	// ViolationAgentOvercommit: the same, by what the agents' Allocate
	// answered (NVIDIA_VISIBLE_DEVICES, CUDA_DEVICE_MEMORY_LIMIT_<i>,
	// CUDA_DEVICE_SM_LIMIT) to the fake kubelets for live pods.
	ViolationAgentOvercommit = "overcommit-allocate"
	// ViolationAnswerMismatch: an Allocate answer differs from the pod's
	// allocation annotation (a pod got another pod's card or limits).
	ViolationAnswerMismatch = "allocate-answer-mismatch"
	// ViolationAgentRefusal: an agent refused our scheduler's allocation as
	// overcommitted or forged (PermissionDenied).
	ViolationAgentRefusal = "agent-refused-allocation"
	// ViolationUnhealthyBind: a pod was bound to a card its node had
	// reported unhealthy for a while.
	ViolationUnhealthyBind = "bound-to-unhealthy-card"
	// ViolationAllocationLost: a pod bound before a scheduler restart
	// lost or changed its node or allocation.
	ViolationAllocationLost = "allocation-lost-after-restart"
	// ViolationEndState: at the end a pod is neither Running and admitted
	// nor Pending with a reason.
	ViolationEndState = "pod-end-state"
	// ViolationLock: a node lock was treated as held past its expiry, or
	// an expired lock kept a node from binding.
	ViolationLock = "node-lock-past-expiry"
	// ViolationFault: an injected fault did not have its documented
	// effect (an agent that did not register again, a card whose health
	// was not reported).
	ViolationFault = "fault-not-handled"
)

// cardKey names a card by node and UUID: an agent could register any
// UUID, and a node-qualified key keeps two nodes' cards apart even then.
type cardKey struct{ node, uuid string }

func (k cardKey) String() string { return k.node + "/" + k.uuid }

// cardCap is a card's capacity from its node's registration.
type cardCap struct {
	count, memMiB int
	healthy       bool
}

// share is one container's part of one card.
type share struct {
	pod          string
	memMiB, core int
}

// Auditor watches every pod and the GPU nodes and checks the sharing
// invariants at every Sample: per card, the live pods' allocation
// annotations and the agents' Allocate answers stay within the card's
// memory, cores and share count; every answer matches its pod's
// annotation; agents never refuse our allocations as overcommitted or
// forged; no pod is bound to a card reported unhealthy for more than
// unhealthyGrace. CheckKept compares pods across a scheduler restart and
// EndCheck (audit_end.go) the final state.
type Auditor struct {
	c         *Cluster
	namespace string
	lockKey   string
	lockTTL   time.Duration

	pods, nodes cache.Indexer
	cancel      context.CancelFunc

	mu         sync.Mutex
	violations map[string]*Violation
	order      []string
	samples    int
	// unhealthySince is when each card was first seen unhealthy.
	unhealthySince map[cardKey]time.Time
	// seen* are the campaign namespace's pods by what happened to them.
	seenPods, seenBound, seenAdmitted, seenAdmissionFailed map[types.UID]bool
	maxLive                                                int
	locks                                                  LockCounts
	// overlaps counts binds seen while another pod of the node was
	// pending with its agent, overlapsSameCount those where the two share
	// a card count (pods the agent cannot tell apart).
	overlaps, overlapsSameCount int
}

// NewAuditor starts the informers. The namespace is the campaign's (pods
// elsewhere are counted on the cards but not in the end check); lockKey and
// lockTTL describe the node lock when the scheduler takes one.
func NewAuditor(ctx context.Context, c *Cluster, namespace, lockKey string, lockTTL time.Duration) (*Auditor, error) {
	a := &Auditor{
		c: c, namespace: namespace, lockKey: lockKey, lockTTL: lockTTL,
		violations:     map[string]*Violation{},
		unhealthySince: map[cardKey]time.Time{},
		seenPods:       map[types.UID]bool{}, seenBound: map[types.UID]bool{},
		seenAdmitted: map[types.UID]bool{}, seenAdmissionFailed: map[types.UID]bool{},
		locks: LockCounts{values: map[string]*lockLife{}},
	}
	ctx, a.cancel = context.WithCancel(ctx)
	factory := informers.NewSharedInformerFactory(c.Kube, 0)
	podInf := factory.Core().V1().Pods().Informer()
	nodeInf := factory.Core().V1().Nodes().Informer()
	if _, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.podChanged(obj) },
		UpdateFunc: func(_, obj any) { a.podChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("audit pods: %w", err)
	}
	if _, err := nodeInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { a.nodeChanged(obj) },
		UpdateFunc: func(_, obj any) { a.nodeChanged(obj) },
	}); err != nil {
		return nil, fmt.Errorf("audit nodes: %w", err)
	}
	a.pods, a.nodes = podInf.GetIndexer(), nodeInf.GetIndexer()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), podInf.HasSynced, nodeInf.HasSynced) {
		a.cancel()
		return nil, fmt.Errorf("audit: informers did not sync")
	}
	return a, nil
}

// Stop stops the informers.
func (a *Auditor) Stop() { a.cancel() }

// podByUID returns the pod with the UID from the informer, or nil.
func (a *Auditor) podByUID(uid types.UID) *v1.Pod {
	for _, obj := range a.pods.List() {
		if pod := obj.(*v1.Pod); pod.UID == uid {
			return pod
		}
	}
	return nil
}

// flag records a violation, once per kind and subject.
func (a *Auditor) flag(kind, subject, evidence string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.flagLocked(kind, subject, evidence)
}

func (a *Auditor) flagLocked(kind, subject, evidence string) {
	key := kind + " " + subject
	if v, ok := a.violations[key]; ok {
		v.Seen++
		return
	}
	a.violations[key] = &Violation{Kind: kind, Subject: subject, First: time.Now(), Seen: 1, Evidence: evidence}
	a.order = append(a.order, key)
}

// Violations returns what was found so far, in the order first seen.
func (a *Auditor) Violations() []Violation {
	a.mu.Lock()
	defer a.mu.Unlock()
	out := make([]Violation, 0, len(a.order))
	for _, k := range a.order {
		out = append(out, *a.violations[k])
	}
	return out
}

func (a *Auditor) podChanged(obj any) {
	pod, ok := obj.(*v1.Pod)
	if !ok || pod.Namespace != a.namespace {
		return
	}
	a.mu.Lock()
	a.seenPods[pod.UID] = true
	if pod.Status.Phase == v1.PodFailed && pod.Status.Reason == ReasonUnexpectedAdmissionError {
		a.seenAdmissionFailed[pod.UID] = true
	}
	if pod.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseSuccess {
		a.seenAdmitted[pod.UID] = true
	}
	if pod.Spec.NodeName != "" && !a.seenBound[pod.UID] {
		a.seenBound[pod.UID] = true
		a.checkBoundHealthyLocked(pod)
		a.countOverlapLocked(pod)
	}
	a.mu.Unlock()
}

// countOverlapLocked counts the bind of pod if another live pod of its
// node is pending with the agent (bind-phase allocating) as the pod
// informer shows them (agent classes, docs/architecture.md "Which binds may
// overlap on a node").
func (a *Auditor) countOverlapLocked(pod *v1.Pod) {
	counts := func(p *v1.Pod) map[int]bool {
		out := map[int]bool{}
		for _, ctr := range decodeIDs(p.Annotations[vgpuproto.AnnotationIDs]) {
			if len(ctr) > 0 {
				out[len(ctr)] = true
			}
		}
		return out
	}
	mine := counts(pod)
	other, same := false, false
	for _, obj := range a.pods.List() {
		p := obj.(*v1.Pod)
		if p.UID == pod.UID || p.Spec.NodeName != pod.Spec.NodeName || !live(p) || p.DeletionTimestamp != nil ||
			p.Annotations[vgpuproto.AnnotationBindPhase] != vgpuproto.BindPhaseAllocating {
			continue
		}
		other = true
		for n := range counts(p) {
			same = same || mine[n]
		}
	}
	if other {
		a.overlaps++
	}
	if same {
		a.overlapsSameCount++
	}
}

// unhealthyGrace is how long a card may have been reported unhealthy when a
// pod is bound to it: the scheduler decides on the registration it saw at
// the start of its session, and the bind reaches the auditor later.
const unhealthyGrace = 3 * time.Second

func (a *Auditor) checkBoundHealthyLocked(pod *v1.Pod) {
	now := time.Now()
	for _, ctr := range decodeIDs(pod.Annotations[vgpuproto.AnnotationIDs]) {
		for _, d := range ctr {
			k := cardKey{pod.Spec.NodeName, d.uuid}
			if since, ok := a.unhealthySince[k]; ok && now.Sub(since) > unhealthyGrace {
				a.flagLocked(ViolationUnhealthyBind, pod.Namespace+"/"+pod.Name,
					fmt.Sprintf("bound to card %s, reported unhealthy since %s (%s before the bind was seen)",
						k, since.Format("15:04:05.000"), now.Sub(since).Round(time.Millisecond)))
			}
		}
	}
}

func (a *Auditor) nodeChanged(obj any) {
	node, ok := obj.(*v1.Node)
	if !ok {
		return
	}
	now := time.Now()
	caps := registeredCards(node)
	a.mu.Lock()
	defer a.mu.Unlock()
	for uuid, cp := range caps {
		k := cardKey{node.Name, uuid}
		_, was := a.unhealthySince[k]
		switch {
		case !cp.healthy && !was:
			a.unhealthySince[k] = now
		case cp.healthy && was:
			delete(a.unhealthySince, k)
		}
	}
	if a.lockKey != "" {
		a.locks.observe(node.Name, node.Annotations[a.lockKey], now, a.lockTTL)
	}
}

// registeredCards decodes the node's vGPU registration; a registration
// that does not decode registers no card.
func registeredCards(node *v1.Node) map[string]cardCap {
	out := map[string]cardCap{}
	cards, _ := vgpuproto.DecodeRegister(node.Annotations[vgpuproto.AnnotationRegister])
	for _, c := range cards {
		out[c.UUID] = cardCap{count: int(c.Count), memMiB: int(c.MemMiB), healthy: c.Healthy}
	}
	return out
}

// device is one card of one container's allocation.
type device struct {
	uuid         string
	memMiB, core int
}

// decodeIDs decodes volcano.sh/vgpu-ids-new into the shared cards of each
// container; a value that does not decode holds nothing. MIG instances are
// left out: they are not shares of a card's memory and cores.
func decodeIDs(value string) [][]device {
	entries, _ := vgpuproto.DecodeAllocation(value)
	out := make([][]device, len(entries))
	for i, devs := range entries {
		for _, d := range devs {
			if !d.IsMIG() {
				out[i] = append(out[i], device{uuid: d.UUID, memMiB: int(d.Mem), core: int(d.Cores)})
			}
		}
	}
	return out
}

// live reports whether the pod holds its cards: bound and not terminated
// (terminating pods still hold them until they are gone).
func live(pod *v1.Pod) bool {
	return pod.Spec.NodeName != "" && pod.Status.Phase != v1.PodSucceeded && pod.Status.Phase != v1.PodFailed
}

// Sample checks the card invariants on the informers' current state. The
// pod informer's store is a consistent prefix of the API server's history
// (one watch), so a pod is never counted together with a pod that took its
// place; Allocate answers are counted only for pods that store shows live.
func (a *Auditor) Sample() {
	caps := map[cardKey]cardCap{}
	for _, obj := range a.nodes.List() {
		node := obj.(*v1.Node)
		for uuid, cp := range registeredCards(node) {
			caps[cardKey{node.Name, uuid}] = cp
		}
	}
	byAnnotation := map[cardKey][]share{}
	byAnswer := map[cardKey][]share{}
	liveCampaign := 0
	for _, obj := range a.pods.List() {
		pod := obj.(*v1.Pod)
		if !live(pod) {
			continue
		}
		if pod.Namespace == a.namespace {
			liveCampaign++
		}
		name := pod.Namespace + "/" + pod.Name
		ids := decodeIDs(pod.Annotations[vgpuproto.AnnotationIDs])
		for _, ctr := range ids {
			for _, d := range ctr {
				k := cardKey{pod.Spec.NodeName, d.uuid}
				byAnnotation[k] = append(byAnnotation[k], share{pod: name, memMiB: d.memMiB, core: d.core})
			}
		}
		a.sampleAnswers(pod, ids, caps, byAnswer)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.samples++
	a.maxLive = max(a.maxLive, liveCampaign)
	a.checkCaps(ViolationOvercommit, caps, byAnnotation)
	a.checkCaps(ViolationAgentOvercommit, caps, byAnswer)
}

// sampleAnswers adds the pod's Allocate answers to byAnswer and checks them
// against its annotation and for refusals.
func (a *Auditor) sampleAnswers(pod *v1.Pod, ids [][]device, caps map[cardKey]cardCap, byAnswer map[cardKey][]share) {
	node := a.c.Node(pod.Spec.NodeName)
	if node == nil || node.Kubelet == nil {
		return
	}
	rec, ok := node.Kubelet.Allocation(pod.UID)
	if !ok {
		return
	}
	name := pod.Namespace + "/" + pod.Name
	for _, ca := range rec.Containers {
		for _, e := range ca.Errors {
			if strings.Contains(e, "code = PermissionDenied") {
				a.flag(ViolationAgentRefusal, name, e)
			}
		}
		if ca.Envs == nil {
			continue
		}
		got, whole := answerDevices(ca.Envs, func(uuid string) int { return caps[cardKey{pod.Spec.NodeName, uuid}].memMiB })
		for _, d := range got {
			k := cardKey{pod.Spec.NodeName, d.uuid}
			byAnswer[k] = append(byAnswer[k], share{pod: name, memMiB: d.memMiB, core: d.core})
		}
		idx := containerIndex(pod, ca.Container)
		if idx < 0 || idx >= len(ids) || !sameDevices(ids[idx], got, whole) {
			var want []device
			if idx >= 0 && idx < len(ids) {
				want = ids[idx]
			}
			a.flag(ViolationAnswerMismatch, name+"/"+ca.Container,
				fmt.Sprintf("Allocate answered %+v, the pod's %s says %+v", got, vgpuproto.AnnotationIDs, want))
		}
	}
}

// answerDevices reads the cards and limits of an Allocate answer. An answer
// without libvgpu's limits gives the container its cards whole (the agent's
// rule: nvidia.Inventory.Whole): each counts as all of the card's
// registered memory (capMiB) and all its cores, and whole is true.
func answerDevices(envs map[string]string, capMiB func(uuid string) int) (out []device, whole bool) {
	visible := envs["NVIDIA_VISIBLE_DEVICES"]
	if visible == "" {
		return nil, false
	}
	_, limited := envs["CUDA_DEVICE_MEMORY_LIMIT_0"]
	cores, _ := strconv.Atoi(envs["CUDA_DEVICE_SM_LIMIT"])
	for i, uuid := range strings.Split(visible, ",") {
		if !limited {
			out = append(out, device{uuid: uuid, memMiB: capMiB(uuid), core: CoresPerCard})
			continue
		}
		mem, _ := strconv.Atoi(strings.TrimSuffix(envs["CUDA_DEVICE_MEMORY_LIMIT_"+strconv.Itoa(i)], "m"))
		out = append(out, device{uuid: uuid, memMiB: mem, core: cores})
	}
	return out, !limited
}

// sameDevices reports whether an answer (got) gives what the annotation
// (want) says. A whole answer matches only entries that are whole: all of
// the card's memory, and no SM limit (cores 0) or all of them.
func sameDevices(want, got []device, whole bool) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		switch {
		case want[i].uuid != got[i].uuid:
			return false
		case whole && (want[i].memMiB < got[i].memMiB || want[i].core != 0 && want[i].core < CoresPerCard):
			return false
		case !whole && want[i] != got[i]:
			return false
		}
	}
	return true
}

func containerIndex(pod *v1.Pod, name string) int {
	for i, c := range pod.Spec.Containers {
		if c.Name == name {
			return i
		}
	}
	return -1
}

// checkCaps flags every card whose shares exceed its capacity.
func (a *Auditor) checkCaps(kind string, caps map[cardKey]cardCap, shares map[cardKey][]share) {
	for k, ss := range shares {
		cp, ok := caps[k]
		if !ok {
			continue // a card the node no longer registers: nothing to compare with
		}
		mem, cores := 0, 0
		for _, s := range ss {
			mem += s.memMiB
			cores += s.core
		}
		if mem <= cp.memMiB && cores <= CoresPerCard && len(ss) <= cp.count {
			continue
		}
		holders := make([]string, 0, len(ss))
		for _, s := range ss {
			holders = append(holders, fmt.Sprintf("%s (%d MiB, %d%%)", s.pod, s.memMiB, s.core))
		}
		sort.Strings(holders)
		a.flagLocked(kind, k.String()+" held by "+strings.Join(holders, ", "),
			fmt.Sprintf("%d/%d MiB, %d/%d%% cores, %d/%d sharers", mem, cp.memMiB, cores, CoresPerCard, len(ss), cp.count))
	}
}

// boundAlloc is a bound pod's node and allocation.
type boundAlloc struct {
	name, node, ids string
}

// SnapshotBound returns the live pods holding an allocation, by UID, to
// compare with CheckKept after a scheduler restart.
func (a *Auditor) SnapshotBound() map[types.UID]boundAlloc {
	out := map[types.UID]boundAlloc{}
	for _, obj := range a.pods.List() {
		pod := obj.(*v1.Pod)
		if live(pod) && pod.Annotations[vgpuproto.AnnotationIDs] != "" {
			out[pod.UID] = boundAlloc{name: pod.Namespace + "/" + pod.Name, node: pod.Spec.NodeName, ids: pod.Annotations[vgpuproto.AnnotationIDs]}
		}
	}
	return out
}

// CheckKept flags every pod of the snapshot that still exists with another
// node or allocation: a restarted scheduler must build on what its
// predecessor bound, never move or rewrite it.
func (a *Auditor) CheckKept(snap map[types.UID]boundAlloc) (kept int) {
	now := map[types.UID]*v1.Pod{}
	for _, obj := range a.pods.List() {
		pod := obj.(*v1.Pod)
		now[pod.UID] = pod
	}
	for uid, was := range snap {
		pod, ok := now[uid]
		if !ok {
			continue // deleted since: by the workload, a bind fault or a job restart
		}
		if pod.Spec.NodeName != was.node || pod.Annotations[vgpuproto.AnnotationIDs] != was.ids {
			a.flag(ViolationAllocationLost, was.name, fmt.Sprintf("before the restart on %s with %q, now on %q with %q",
				was.node, was.ids, pod.Spec.NodeName, pod.Annotations[vgpuproto.AnnotationIDs]))
			continue
		}
		kept++
	}
	return kept
}
