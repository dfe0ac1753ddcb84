package deviceshare

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

	"github.com/vgpushare/vshare/device"
)

// advertiser writes the totals of resources nodes do not advertise into
// their status (see device.Advertiser), from one background worker, only when
// they differ from what the node shows: the number of node writes follows
// inventory changes, not sessions.
//
// Locking: mu guards desired and the worker's start; the work queue has its
// own lock.
type advertiser struct {
	mu      sync.Mutex
	desired map[string]v1.ResourceList
	queue   workqueue.RateLimitingInterface
	started bool
	ctx     context.Context
	cancel  context.CancelFunc
	// patched counts successful node status patches, for tests and metrics.
	patched int
}

func newAdvertiser() *advertiser {
	ctx, cancel := context.WithCancel(context.Background())
	return &advertiser{
		desired: make(map[string]v1.ResourceList),
		queue:   workqueue.NewNamedRateLimitingQueue(workqueue.DefaultControllerRateLimiter(), "deviceshare-advertiser"),
		ctx:     ctx,
		cancel:  cancel,
	}
}

// observe compares, for every node of the session, the advertised totals
// of its devices with the node's status and queues the nodes that differ.
func (a *advertiser) observe(client kubernetes.Interface, nodes map[string]*vcapi.NodeInfo, s *sessionState) {
	for name, sn := range s.nodes {
		ni := nodes[name]
		if ni == nil || ni.Node == nil {
			continue
		}
		want := advertisedTotals(sn)
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

// patchCount returns how many node status patches succeeded.
func (a *advertiser) patchCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.patched
}

func advertisedTotals(sn *sessionNode) v1.ResourceList {
	var out v1.ResourceList
	for _, d := range sn.devices {
		if d == nil || d.base == nil {
			continue
		}
		adv, ok := d.base.(device.Advertiser)
		if !ok {
			continue
		}
		for k, q := range adv.Advertised() {
			if out == nil {
				out = v1.ResourceList{}
			}
			out[k] = q
		}
	}
	return out
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

func (a *advertiser) start(client kubernetes.Interface) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.started {
		return
	}
	a.started = true
	go a.run(client)
}

func (a *advertiser) stop() {
	a.cancel()
	a.queue.ShutDown()
}

func (a *advertiser) run(client kubernetes.Interface) {
	for a.processNext(client) {
	}
}

func (a *advertiser) processNext(client kubernetes.Interface) bool {
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
