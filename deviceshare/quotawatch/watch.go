// Package quotawatch serves the deviceshare plugin the cluster's
// ResourceQuotas (an informer started with the first session's client) and
// keeps the usage the last session counted, which the quota metrics export
// (docs/quotas.md).
package quotawatch

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// SyncTimeout bounds how long the first session waits for the
// ResourceQuota informer's initial list; until it is listed, pods asking
// for a quota-limited device wait (see quotaState.unknown).
const SyncTimeout = 10 * time.Second

// Source lists the cluster's ResourceQuotas for the namespace quotas
// on shares (quota.go).
type Source interface {
	// ResourceQuotas returns every ResourceQuota; synced is false until
	// the initial list is complete. The objects are shared: callers must
	// not modify them.
	ResourceQuotas() (quotas []*v1.ResourceQuota, synced bool)
}

// Watch holds the plugin's ResourceQuota source and the usage the last
// session saw, which the quota metrics export.
//
// Locking: mu guards every field. The source is set once: injected by
// tests, or an informer started with the first session's client.
type Watch struct {
	mu sync.Mutex
	// Src is the source; tests inject one, otherwise Source starts an
	// informer.
	Src  Source
	last []Sample
}

// Sample is one enforced limit and its namespace's usage.
type Sample struct {
	Namespace, Quota, Resource string
	Used, Hard                 int64
}

// Source returns the ResourceQuota source, starting the informer with the
// first non-nil client and waiting for its initial list for at most
// SyncTimeout; nil without a client or an injected source.
func (w *Watch) Source(ctx context.Context, client kubernetes.Interface) Source {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.Src != nil || client == nil {
		return w.Src
	}
	quotas := client.CoreV1().ResourceQuotas(metav1.NamespaceAll)
	lw := &cache.ListWatch{
		ListFunc: func(opts metav1.ListOptions) (runtime.Object, error) { return quotas.List(ctx, opts) },
		WatchFunc: func(opts metav1.ListOptions) (watch.Interface, error) {
			return quotas.Watch(ctx, opts)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &v1.ResourceQuota{}, 0, cache.Indexers{})
	go informer.Run(ctx.Done())
	// WaitForCacheSync polls every 100 ms; a fresh informer on a
	// responsive API server lists in a few milliseconds.
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, SyncTimeout, true,
		func(context.Context) (bool, error) { return informer.HasSynced(), nil })
	if err != nil {
		klog.ErrorS(err, "ResourceQuotas not listed yet; pods asking for quota-limited devices wait until they are (the scheduler needs list and watch on resourcequotas)",
			"plugin", pluginargs.PluginName)
	}
	w.Src = informerQuotas{informer}
	klog.V(2).InfoS("Watching ResourceQuotas for namespace quotas on shares", "plugin", pluginargs.PluginName)
	return w.Src
}

// informerQuotas serves ResourceQuotas from an informer's store.
type informerQuotas struct {
	informer cache.SharedIndexInformer
}

func (q informerQuotas) ResourceQuotas() ([]*v1.ResourceQuota, bool) {
	if !q.informer.HasSynced() {
		return nil, false
	}
	objs := q.informer.GetStore().List()
	out := make([]*v1.ResourceQuota, 0, len(objs))
	for _, o := range objs {
		if rq, ok := o.(*v1.ResourceQuota); ok {
			out = append(out, rq)
		}
	}
	return out, true
}

// Record keeps the session's limits and usage for the metrics, sorted by
// namespace, quota and resource.
func (w *Watch) Record(samples []Sample) {
	sort.Slice(samples, func(i, j int) bool {
		a, b := samples[i], samples[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		if a.Quota != b.Quota {
			return a.Quota < b.Quota
		}
		return a.Resource < b.Resource
	})
	w.mu.Lock()
	w.last = samples
	w.mu.Unlock()
}

// Samples returns what the last session recorded.
func (w *Watch) Samples() []Sample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}
