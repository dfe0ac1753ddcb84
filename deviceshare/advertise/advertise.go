// Package advertise writes into nodes' status the totals of device
// resources no kubelet device plugin registers (device.Advertiser), so that
// Volcano's and the kubelet's node-level checks, which read allocatable,
// never reject a pod the cards could take. One background worker patches a
// node only when its status differs: the number of node writes follows
// inventory changes, not sessions.
package advertise

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

// Advertiser writes the totals of resources nodes do not advertise into
// their status (see device.Advertiser), from one background worker, only when
// they differ from what the node shows: the number of node writes follows
// inventory changes, not sessions.
//
// Locking: mu guards desired and the worker's start; the work queue has its
// own lock.
type Advertiser struct {
	mu      sync.Mutex
	desired map[string]v1.ResourceList
	queue   workqueue.RateLimitingInterface
	started bool
	ctx     context.Context
	cancel  context.CancelFunc
	// patched counts successful node status patches, for tests and metrics.
	patched int
}

// New returns an Advertiser whose worker starts with the first client.
func New() *Advertiser {
	ctx, cancel := context.WithCancel(context.Background())
	return &Advertiser{
		desired: make(map[string]v1.ResourceList),
		queue:   workqueue.NewNamedRateLimitingQueue(workqueue.DefaultControllerRateLimiter(), "deviceshare-advertiser"),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// Observe compares, for every node of the session, the advertised totals
// of its devices (totals(name), nil for none) with the node's status and
// queues the nodes that differ.
func (a *Advertiser) Observe(client kubernetes.Interface, nodes map[string]*vcapi.NodeInfo, totals func(node string) v1.ResourceList) {
	for name, ni := range nodes {
		if ni == nil || ni.Node == nil {
			continue
		}
		want := totals(name)
		if len(want) == 0 || !differs(ni.Node, want) {
			continue
		}
		a.mu.Lock()
		a.desired[name] = want
		a.mu.Unlock()
		a.queue.Add(name)
	}
	if client != nil {
		a.start(client)
	}
}

// PatchCount returns how many node status patches succeeded.
func (a *Advertiser) PatchCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.patched
}

func differs(node *v1.Node, want v1.ResourceList) bool {
	for k, q := range want {
		c, ok := node.Status.Capacity[k]
		if !ok || c.Cmp(q) != 0 {
			return true
		}
		al, ok := node.Status.Allocatable[k]
		if !ok || al.Cmp(q) != 0 {
			return true
		}
	}
	return false
}

func (a *Advertiser) start(client kubernetes.Interface) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return
	}
	a.started = true
	go a.run(client)
}

// Stop ends the worker.
func (a *Advertiser) Stop() {
	a.cancel()
	a.queue.ShutDown()
}

func (a *Advertiser) run(client kubernetes.Interface) {
	for a.processNext(client) {
	}
}

func (a *Advertiser) processNext(client kubernetes.Interface) bool {
	item, shutdown := a.queue.Get()
	if shutdown {
		return false
	}
	defer a.queue.Done(item)
	name := item.(string)
	a.mu.Lock()
	want := a.desired[name]
	a.mu.Unlock()
	if want == nil {
		a.queue.Forget(item)
		return true
	}
	if err := patchNodeResources(a.ctx, client, name, want); err != nil {
		klog.ErrorS(err, "Failed to advertise device resources on the node; retrying", "node", name)
		a.queue.AddRateLimited(item)
		return true
	}
	a.mu.Lock()
	if sameList(a.desired[name], want) {
		delete(a.desired, name)
	}
	a.patched++
	a.mu.Unlock()
	a.queue.Forget(item)
	klog.V(2).InfoS("Advertised device resources in node status", "node", name, "resources", want)
	return true
}

func patchNodeResources(ctx context.Context, client kubernetes.Interface, name string, want v1.ResourceList) error {
	patch := map[string]interface{}{
		"status": map[string]interface{}{"capacity": want, "allocatable": want},
	}
	data, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("encode node %s status patch: %w", name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, data, metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("patch node %s status: %w", name, err)
	}
	return nil
}

func sameList(a, b v1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, q := range a {
		o, ok := b[k]
		if !ok || o.Cmp(q) != 0 {
			return false
		}
	}
	return true
}
