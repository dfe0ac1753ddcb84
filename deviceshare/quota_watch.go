package deviceshare

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// quotaSyncTimeout bounds how long the first session waits for the
// ResourceQuota informer's initial list; until it is listed, pods asking
// for a quota-limited device wait (see quotaState.unknown).
const quotaSyncTimeout = 10 * time.Second

// QuotaSource lists the cluster's ResourceQuotas for the namespace quotas
// on shares (quota.go).
type QuotaSource interface {
	// ResourceQuotas returns every ResourceQuota; synced is false until
	// the initial list is complete. The objects are shared: callers must
	// not modify them.
	ResourceQuotas() (quotas []*v1.ResourceQuota, synced bool)
}

// quotaWatch holds the State's ResourceQuota source and the usage the last
// session saw, which the quota metrics export.
//
// Locking: mu guards every field. The source is set once: injected by
// tests, or an informer started with the first session's client.
type quotaWatch struct {
	mu   sync.Mutex
	src  QuotaSource
	last []quotaSample
}

// quotaSample is one enforced limit and its namespace's usage.
type quotaSample struct {
	namespace, quota, name string
	used, hard             int64
}

// source returns the ResourceQuota source, starting the informer with the
// first non-nil client and waiting for its initial list for at most
// quotaSyncTimeout; nil without a client or an injected source.
func (w *quotaWatch) source(ctx context.Context, client kubernetes.Interface) QuotaSource {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.src != nil || client == nil {
		return w.src
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
	err := wait.PollUntilContextTimeout(ctx, 5*time.Millisecond, quotaSyncTimeout, true,
		func(context.Context) (bool, error) { return informer.HasSynced(), nil })
	if err != nil {
		klog.ErrorS(err, "ResourceQuotas not listed yet; pods asking for quota-limited devices wait until they are (the scheduler needs list and watch on resourcequotas)",
			"plugin", PluginName)
	}
	w.src = informerQuotas{informer}
	klog.V(2).InfoS("Watching ResourceQuotas for namespace quotas on shares", "plugin", PluginName)
	return w.src
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

// record keeps the session's limits and usage for the metrics.
func (w *quotaWatch) record(q *quotaState) {
	var samples []quotaSample
	if q != nil {
		for ns, limits := range q.limits {
			for _, l := range limits {
				samples = append(samples, quotaSample{namespace: ns, quota: l.Quota, name: l.Name(),
					used: q.used[ns][string(l.Resource)], hard: l.Hard})
			}
		}
	}
	sort.Slice(samples, func(i, j int) bool {
		a, b := samples[i], samples[j]
		if a.namespace != b.namespace {
			return a.namespace < b.namespace
		}
		if a.quota != b.quota {
			return a.quota < b.quota
		}
		return a.name < b.name
	})
	w.mu.Lock()
	w.last = samples
	w.mu.Unlock()
}

// samples returns what the last session recorded.
func (w *quotaWatch) samples() []quotaSample {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// quotaCollector exports, at scrape time, each enforced namespace quota
// limit on a device resource and what the namespace uses of it, as the
// last session counted it (pods holding cards and that session's
// allocations).
type quotaCollector struct {
	watch      *quotaWatch
	used, hard *prometheus.Desc
}

var _ prometheus.Collector = (*quotaCollector)(nil)

// collectQuotas registers the quota collector. A nil *metrics does nothing.
func (m *metrics) collectQuotas(w *quotaWatch) {
	if m == nil || m.reg == nil {
		return
	}
	labels := []string{"namespace", "quota", "resource"}
	c := &quotaCollector{
		watch: w,
		used: prometheus.NewDesc(metricsPrefix+"quota_used", "What the namespace's pods hold of a device resource a "+
			"ResourceQuota limits (limits.<resource>: memory and cores times cards), as the scheduler counts it.", labels, nil),
		hard: prometheus.NewDesc(metricsPrefix+"quota_hard", "The ResourceQuota's hard limit on the device resource.", labels, nil),
	}
	register(m.reg, prometheus.Collector(c))
}

// Describe sends the collector's descriptors.
func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.used
	ch <- c.hard
}

// Collect sends the last session's quota usage.
func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range c.watch.samples() {
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(s.used), s.namespace, s.quota, s.name)
		ch <- prometheus.MustNewConstMetric(c.hard, prometheus.GaugeValue, float64(s.hard), s.namespace, s.quota, s.name)
	}
}
