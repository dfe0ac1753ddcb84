package agent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/nodeagent"
	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// Defaults of AllocatorOptions.
const (
	// DefaultStaleAfter is how old (by hami.io/bind-time) an allocation may
	// be when the kubelet asks for it: the node lock's lifetime.
	DefaultStaleAfter = nodeagent.DefaultStaleAfter
	// DefaultHookDir is where HAMi's plugin keeps hami-vnpu-core on the host.
	DefaultHookDir = "/usr/local/hami-vnpu-core"
)

// AllocatorOptions configure an Allocator.
type AllocatorOptions struct {
	// Node is this node's name. Required.
	Node string
	// Inventory is the node's chips. Required.
	Inventory *Inventory
	// Lookup finds the node's pending pods. Required.
	Lookup PodLookup
	// Patcher writes annotations. Required.
	Patcher Patcher
	// HookDir is hami-vnpu-core's host directory, the source of the
	// hami-core mounts; empty means DefaultHookDir. The simulated agent
	// only names it in the responses.
	HookDir string
	// StaleAfter refuses allocations older than this; 0 means
	// DefaultStaleAfter.
	StaleAfter time.Duration
	// InformerWait is how long Allocate keeps looking when no pod matches
	// yet (the kubelet may ask before the informer shows the pod).
	InformerWait time.Duration
	// Clock is the time source; nil means the real clock.
	Clock clock.PassiveClock
	// LivePods, when set, lists the node's pods from the API server; a
	// request that finds no pod pending in the informer and no Journal
	// that vouches is then served only a pod pending there when it came
	// (allocation.Arrivals). nil serves any pending pod.
	LivePods func(ctx context.Context) ([]*v1.Pod, error)
	// Journal, when set, follows the informer's pods (give it to the pod
	// informer with Protocol) to say what was pending when a request came
	// without asking the API server.
	Journal *allocation.Journal
	// CountPending, when set, is told, for every request, where the agent
	// learnt which pods were pending (allocation.Pending* constants).
	CountPending func(source string)
}

// Protocol is HAMi's Ascend allocation protocol for chips of commonWord:
// its pods are pending with this agent while their devices-to-allocate
// still names a card of that type (the agents of a node's other chip types
// share the bind-phase).
func Protocol(commonWord string) allocation.Protocol {
	keys := ascendproto.KeysFor(commonWord)
	marker := "," + commonWord + ","
	return allocation.Protocol{
		ToAllocate: keys.ToAllocate, BindPhase: ascendproto.AnnotationBindPhase, Node: ascendproto.AnnotationAssignedNode,
		Allocating: ascendproto.BindPhaseAllocating, Success: ascendproto.BindPhaseSuccess, Failed: ascendproto.BindPhaseFailed,
		Serves: func(pod *v1.Pod) bool { return strings.Contains(pod.Annotations[keys.ToAllocate], marker) },
	}
}

// Allocator serves the kubelet's Allocate calls. It is safe for concurrent
// use; calls are serialised, as the protocol needs.
type Allocator struct {
	opts     AllocatorOptions
	keys     ascendproto.Keys
	protocol allocation.Protocol
	// claims checks each claim's node and age.
	claims allocation.ClaimCheck
	// arrivals says which pods a request may be served (built from opts).
	arrivals allocation.Arrivals

	mu sync.Mutex
	// tracker writes the pods' allocation outcomes and remembers them
	// until the informer shows them.
	tracker *allocation.Tracker
}

// NewAllocator validates the options and returns an Allocator.
func NewAllocator(opts AllocatorOptions) (*Allocator, error) {
	if opts.Node == "" || opts.Inventory == nil || opts.Lookup == nil || opts.Patcher == nil {
		return nil, errors.New("allocator: Node, Inventory, Lookup and Patcher are required")
	}
	if opts.HookDir == "" {
		opts.HookDir = DefaultHookDir
	}
	if opts.StaleAfter <= 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	keys := ascendproto.KeysFor(opts.Inventory.Entry().CommonWord)
	protocol := Protocol(opts.Inventory.Entry().CommonWord)
	arrivals := allocation.Arrivals{Node: opts.Node, Protocol: protocol, Informer: opts.Lookup.Pending,
		Journal: opts.Journal, LivePods: opts.LivePods, Count: opts.CountPending}
	claims := allocation.ClaimCheck{Node: opts.Node, NodeKey: protocol.Node, BindTimeKey: ascendproto.AnnotationBindTime, StaleAfter: opts.StaleAfter}
	return &Allocator{opts: opts, keys: keys, protocol: protocol, arrivals: arrivals, claims: claims, tracker: allocation.NewTracker(allocation.TrackerOptions{
		Node: opts.Node, Protocol: protocol, Patcher: opts.Patcher, Kind: "Ascend", StaleAfter: opts.StaleAfter, Clock: opts.Clock,
	})}, nil
}

// Allocate implements the device plugin's Allocate, one container request
// at a time. Errors are gRPC statuses (see the sentinel errors).
func (a *Allocator) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	// What the request may be served is fixed when it comes, before it
	// waits for the requests ahead of it.
	arrived := a.arrivals.Arrive(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	return allocation.Serve(ctx, req, "Ascend", a.opts.Node, func(ctx context.Context, ids []string) (*pluginapi.ContainerAllocateResponse, error) {
		return a.allocateOne(ctx, ids, arrived)
	})
}

// allocateOne serves one container's request.
func (a *Allocator) allocateOne(ctx context.Context, ids []string, arrived allocation.Arrival) (*pluginapi.ContainerAllocateResponse, error) {
	for _, id := range ids {
		if _, ok := a.opts.Inventory.chipOfDevice(id); !ok {
			return nil, fmt.Errorf("node %s: device %q was not advertised for %s: %w",
				a.opts.Node, id, a.opts.Inventory.Entry().ResourceName, ErrUnknownDevice)
		}
	}
	c, err := a.chooseWaiting(ctx, len(ids), arrived)
	if err != nil {
		return nil, err
	}
	resp := a.respond(c)
	c.Entries[c.Index] = nil
	consumed := ascendproto.EncodeAssignments(c.Entries)
	done := ascendproto.NextPending(c.Entries) < 0
	if err := a.tracker.Served(ctx, c.Pod, c.Container.Name, consumed, done); err != nil {
		return nil, err
	}
	klog.V(2).InfoS("Allocated Ascend chips", "pod", klog.KObj(c.Pod), "container", c.Container.Name,
		"chips", resp.Envs[ascendproto.EnvVisibleDevices], "podDone", done)
	return resp, nil
}

// chooseWaiting is choose among the pods the request may be served,
// looking again for up to InformerWait while none matches and none was
// refused (allocation.Wait): a pod pending when the request came may not
// have reached the informer yet. When no pod can join them it answers at
// once.
func (a *Allocator) chooseWaiting(ctx context.Context, n int, arrived allocation.Arrival) (*candidate, error) {
	return allocation.Wait(ctx, a.opts.InformerWait, func() (*candidate, bool, error) {
		allow, final := arrived.Allowed()
		c, refused, err := a.choose(ctx, allocation.Request{Devices: n, Now: a.opts.Clock.Now(), Allow: allow})
		return c, refused || final, err
	})
}
