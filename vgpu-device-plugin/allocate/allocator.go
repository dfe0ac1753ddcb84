package allocate

import (
	"context"
	"errors"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/allocsig"
	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/protocol/nodelock"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// DefaultStaleAfter is how old (by bind-time) an allocation may be when the
// kubelet asks for it: the node lock's lifetime.
const DefaultStaleAfter = nodeagent.DefaultStaleAfter

// MIGApplier provides MIG instances (nvidia.MIG implements it).
type MIGApplier interface {
	Apply(card nvidia.Card, catalogue []config.AllowedMIGGeometries, group string, pos int, othersInUse bool) (string, error)
}

// Options configure an Allocator.
type Options struct {
	// Node is this node's name. Required.
	Node string
	// Inventory returns the node's current cards. Required.
	Inventory func() *nvidia.Inventory
	// Healthy reports a card's health; nil means every card is healthy.
	Healthy func(uuid string) bool
	// Lookup finds the node's vGPU pods. Required.
	Lookup PodLookup
	// Patcher writes annotations. Required.
	Patcher Patcher
	// MIG provides MIG instances; nil refuses MIG allocations.
	MIG MIGApplier
	// LibvgpuHostPath is libvgpu.so on the host. Required.
	LibvgpuHostPath string
	// CacheHostDir is the host directory holding containers/<pod UID>_<container>
	// and ld.so.preload (see WritePreload). Required.
	CacheHostDir string
	// MPSHostRoot is the host directory holding the node's MPS control
	// daemon's pipe, log and shm directories (mps.go), mounted into
	// containers on cards in MPS mode; empty means DefaultMPSHostRoot.
	MPSHostRoot string
	// PassDeviceSpecs adds /dev/nvidia* device specs to the responses.
	PassDeviceSpecs bool
	// StaleAfter refuses allocations older than this; 0 means DefaultStaleAfter.
	StaleAfter time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// NewID names shared-region files; nil means random UUIDs.
	NewID func() string
	// InformerWait is how long Allocate keeps looking for the pod when none
	// matches yet: the kubelet learns of a bound pod at about the same time
	// as this agent's informer, and may ask first. 0 answers at once.
	InformerWait time.Duration
	// LivePods, when set, lists the node's pods from the API server (not
	// the informer). Allocate calls it when a request comes and the
	// informer has no pending pod, and then waits only for the pods pending
	// there at that moment: the pod the kubelet asks for was bound before
	// the kubelet asked, while a pod bound later has its own Allocate
	// coming. nil waits for any pod.
	LivePods func(ctx context.Context) ([]*v1.Pod, error)
	// Journal, when set, follows the informer's pods to say what was
	// pending when a request came without asking the API server
	// (allocation.Journal); LivePods is asked only when it cannot tell.
	Journal *allocation.Journal
	// CountPending, when set, is told, for every request, where the agent
	// learnt which pods were pending (Pending* constants).
	CountPending func(source string)
	// Keys returns the allocation keys in force (internal/allocsig) and the
	// error of their last reload, if it failed; with Keys set, only
	// allocations signed by one of them are served. nil serves unsigned
	// allocations (Volcano's own scheduler does not sign).
	Keys func() (*allocsig.Keyring, error)
	// SchedulerNames, when not empty, are the spec.schedulerName values
	// whose pods get devices.
	SchedulerNames []string
	// Events, when set, records a Warning event EventAllocationFailed on
	// every pod whose allocation fails, naming why: the kubelet's Allocate
	// does not say which pod it is for, so its error may reach another
	// pod's admission.
	Events record.EventRecorder
	// NodeLockName is the node lock key this agent releases after serving
	// a pod (agent.Options.NodeLockName). With Keys set, a served pod whose
	// verified allocation signature covers nodelock.AnnotationTaken and
	// does not name it had no lock taken, and the node is not read.
	NodeLockName string
	// RegionCreated, when set, is called after Allocate created a
	// container's shared region and cards file (the agent wakes the
	// utilisation switch with it: a container that ran alone on a card is
	// throttled again before its new neighbour starts).
	RegionCreated func()
}

// Where a request learnt which pods were pending when it came
// (Options.CountPending).
const (
	PendingFromInformer  = allocation.PendingFromInformer
	PendingFromJournal   = allocation.PendingFromJournal
	PendingFromAPIServer = allocation.PendingFromAPIServer
	PendingUnknown       = allocation.PendingUnknown
)

// Protocol is the vGPU allocation protocol's annotations, for the node agent
// kit (nodeagent/allocation).
var Protocol = allocation.Protocol{
	ToAllocate: vgpuproto.AnnotationToAllocate, BindPhase: vgpuproto.AnnotationBindPhase, Node: vgpuproto.AnnotationNode,
	Allocating: vgpuproto.BindPhaseAllocating, Success: vgpuproto.BindPhaseSuccess, Failed: vgpuproto.BindPhaseFailed,
}

// EventAllocationFailed is the reason of the Warning event recorded on a pod
// whose allocation was refused or failed.
const EventAllocationFailed = "VGPUAllocationFailed"

// Allocator serves Allocate. Create it with New; it is safe for concurrent
// use (Allocate calls are serialised, as the protocol needs).
type Allocator struct {
	opts Options

	// claims checks each claim's node, signature and age.
	claims allocation.ClaimCheck
	// arrivals says which pods a request may be served (built from opts).
	arrivals allocation.Arrivals

	mu sync.Mutex
	// tracker writes the pods' allocation outcomes and remembers them
	// until the informer shows them.
	tracker *allocation.Tracker
	// warned remembers when an event was last recorded on a pod that
	// asks for vGPUs without an allocation (see unambiguous).
	warned map[types.UID]time.Time
}

// New validates the options and returns an Allocator.
func New(opts Options) (*Allocator, error) {
	switch {
	case opts.Node == "":
		return nil, errors.New("allocator: Node is required")
	case opts.Inventory == nil || opts.Lookup == nil || opts.Patcher == nil:
		return nil, errors.New("allocator: Inventory, Lookup and Patcher are required")
	case opts.LibvgpuHostPath == "" || opts.CacheHostDir == "":
		return nil, errors.New("allocator: LibvgpuHostPath and CacheHostDir are required")
	}
	if opts.Healthy == nil {
		opts.Healthy = func(string) bool { return true }
	}
	if opts.MPSHostRoot == "" {
		opts.MPSHostRoot = DefaultMPSHostRoot
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.NewID == nil {
		opts.NewID = func() string { return string(uuid.NewUUID()) }
	}
	return &Allocator{opts: opts, warned: map[types.UID]time.Time{},
		claims: allocation.ClaimCheck{Node: opts.Node, NodeKey: vgpuproto.AnnotationNode, BindTimeKey: vgpuproto.AnnotationBindTime,
			StaleAfter: opts.StaleAfter, Trust: allocation.Trust{SchedulerNames: opts.SchedulerNames, Keys: opts.Keys, Signed: SignedAnnotations}},
		arrivals: allocation.Arrivals{Node: opts.Node, Protocol: Protocol, Informer: opts.Lookup.Allocating,
			Journal: opts.Journal, LivePods: opts.LivePods, Count: opts.CountPending},
		tracker: allocation.NewTracker(allocation.TrackerOptions{Node: opts.Node, Protocol: Protocol, Patcher: opts.Patcher,
			Kind: "vGPU", StaleAfter: opts.StaleAfter, Clock: opts.Clock, Events: opts.Events, EventReason: EventAllocationFailed,
			ReleaseLock: func(p *v1.Pod) bool { return lockToRelease(p, opts.Keys != nil, opts.NodeLockName) }}),
	}, nil
}

// Allocate serves the kubelet's request, one container request at a time.
// Errors are gRPC statuses (see the sentinel errors for the codes).
func (a *Allocator) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	// What the request may be served is fixed when it comes, before it
	// waits for the requests ahead of it.
	arrived := a.arrivals.Arrive(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	return allocation.Serve(ctx, req, "vGPU", a.opts.Node, func(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
		return a.allocateOne(ctx, len(ids), arrived)
	})
}

// chooseWaiting is choose among the pods the request may be served,
// looking again for up to InformerWait while none matches and none was
// refused: a pod pending when the request came may not have reached the
// informer yet. When no pod can join them it answers at once. The wait is
// measured in real time (the kubelet's deadline is), whatever clock stamps
// the allocation.
func (a *Allocator) chooseWaiting(ctx context.Context, inv *nvidia.Inventory, n int, arrived allocation.Arrival) (*candidate, error) {
	return allocation.Wait(ctx, a.opts.InformerWait, func() (*candidate, bool, error) {
		allow, final := arrived.Allowed()
		c, refused, err := a.choose(ctx, inv, allocation.Request{Devices: n, Now: a.opts.Clock.Now(), Allow: allow})
		return c, refused || final, err
	})
}

// allocateOne serves one container request for n virtual devices.
func (a *Allocator) allocateOne(ctx context.Context, n int, arrived allocation.Arrival) (*pluginapi.ContainerAllocateResponse, error) {
	inv := a.opts.Inventory()
	c, err := a.chooseWaiting(ctx, inv, n, arrived)
	if err != nil {
		return nil, err
	}
	uses, err := a.check(c, inv)
	if err != nil {
		a.tracker.Fail(ctx, c.Pod, err)
		return nil, err
	}
	resp, err := a.respond(c, inv, uses)
	if err != nil {
		a.tracker.Fail(ctx, c.Pod, err)
		return nil, err
	}
	consumed := vgpuproto.Consume(c.Entries, c.Index)
	done := nextPendingOf(consumed) < 0
	if err := a.tracker.Served(ctx, c.Pod, c.Container.Name, consumed, done); err != nil {
		return nil, err
	}
	klog.V(2).InfoS("Allocated vGPUs", "pod", klog.KObj(c.Pod), "container", c.Container.Name,
		"devices", resp.Envs[EnvVisibleDevices], "podDone", done)
	return resp, nil
}

// nextPendingOf reports the next pending entry of an annotation value we
// wrote ourselves (it always decodes).
func nextPendingOf(value string) int {
	entries, err := vgpuproto.DecodeAllocation(value)
	if err != nil {
		return -1
	}
	return vgpuproto.NextPending(entries)
}

// lockToRelease reports whether a served pod may hold the node lock
// lockName. Only a signed allocation (signed: the agent serves nothing else)
// whose signature covers nodelock.AnnotationTaken says so for sure; any
// other pod may have had a lock taken by its scheduler (Volcano's and
// HAMi's always take one), so the node is read.
func lockToRelease(p *v1.Pod, signed bool, lockName string) bool {
	v, ok := p.Annotations[nodelock.AnnotationTaken]
	if !signed || !ok || lockName == "" || !allocsig.Covers(p.Annotations, nodelock.AnnotationTaken) {
		return true
	}
	return nodelock.Taken(v, lockName)
}
