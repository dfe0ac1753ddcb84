// Package metrics is the deviceshare plugin's Prometheus metrics: counters
// the session and the binder update, and collectors that read the node
// state's cards and the quota watch's samples at scrape time. Names and
// help texts are an interface operators rely on (docs/metrics.md).
package metrics

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/nodestate"
	"github.com/vgpushare/vshare/deviceshare/quotawatch"
)

const metricsPrefix = "volcano_deviceshare_"

// metrics are the plugin's Prometheus metrics. A nil *metrics (no
// registerer) records nothing.
type Metrics struct {
	reg            prometheus.Registerer
	filterFailures *prometheus.CounterVec
	// filterCounters caches filterFailures' children by [device, reason]:
	// the predicate counts every node it rejects, and WithLabelValues
	// hashes both labels and takes the vector's lock on each call.
	filterCounters sync.Map
	allocations    *prometheus.CounterVec
	lockBusy       prometheus.Counter
	agentWaits     *prometheus.CounterVec
	staleBinds     prometheus.Counter
	argsValid      prometheus.Gauge
	syncDuration   prometheus.Histogram
	assumedPods    prometheus.Gauge
	syncChanges    *prometheus.CounterVec
}

// New registers the metrics with reg; a nil reg counts nothing.
func New(reg prometheus.Registerer) *Metrics {
	if reg == nil {
		return nil
	}
	m := &Metrics{
		reg: reg,
		filterFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "filter_failures_total",
			Help: "Nodes rejected by the device predicate, by device type and reason.",
		}, []string{"device", "reason"}),
		allocations: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "allocations_total",
			Help: "Device allocations made in sessions, by device type and result.",
		}, []string{"device", "result"}),
		lockBusy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "node_lock_busy_total",
			Help: "Binds refused because another allocation held the node lock.",
		}),
		agentWaits: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "agent_turn_waits_total",
			Help: "Binds that waited for the node agent to serve the node's previous pod of the same device type, by result (served, refused).",
		}, []string{"result"}),
		staleBinds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: metricsPrefix + "stale_inventory_binds_total",
			Help: "Binds refused because the node reported a new device inventory (a card's health, size or cordon) after the allocation was made; the pod is placed again.",
		}),
		argsValid: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricsPrefix + "arguments_valid",
			Help: "1 when the plugin arguments in volcano-scheduler.conf are valid, 0 when the plugin serves nothing.",
		}),
		syncDuration: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    metricsPrefix + "ledger_sync_duration_seconds",
			Help:    "Time to bring the device ledger up to date at session open.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 4, 10),
		}),
		assumedPods: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: metricsPrefix + "assumed_pods",
			Help: "Allocations whose bind is in flight (not yet seen with their annotations).",
		}),
		syncChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricsPrefix + "ledger_changes_total",
			Help: "Ledger updates at session open, by kind (decoded inventories, added, removed and rejected pods, confirmed and dropped assumptions).",
		}, []string{"kind"}),
	}
	m.filterFailures = register(reg, m.filterFailures)
	m.allocations = register(reg, m.allocations)
	m.lockBusy = register(reg, m.lockBusy)
	m.agentWaits = register(reg, m.agentWaits)
	m.staleBinds = register(reg, m.staleBinds)
	m.argsValid = register(reg, m.argsValid)
	m.syncDuration = register(reg, m.syncDuration)
	m.assumedPods = register(reg, m.assumedPods)
	m.syncChanges = register(reg, m.syncChanges)
	return m
}

// register registers c, or returns the collector already registered under
// the same name (a second State in one process, as in tests).
func register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(T); ok {
				return existing
			}
		}
		klog.ErrorS(err, "Failed to register deviceshare metric")
	}
	return c
}

func (m *Metrics) FilterFailed(device, reason string) {
	if m == nil {
		return
	}
	key := [2]string{device, reason}
	if c, ok := m.filterCounters.Load(key); ok {
		c.(prometheus.Counter).Inc()
		return
	}
	c := m.filterFailures.WithLabelValues(device, reason)
	m.filterCounters.Store(key, c)
	c.Inc()
}

func (m *Metrics) Allocated(device, result string) {
	if m != nil {
		m.allocations.WithLabelValues(device, result).Inc()
	}
}

func (m *Metrics) NodeLockBusy() {
	if m != nil {
		m.lockBusy.Inc()
	}
}

// AgentWaited counts a bind that waited for the node agent: result is
// "served" or "refused".
func (m *Metrics) AgentWaited(result string) {
	if m != nil {
		m.agentWaits.WithLabelValues(result).Inc()
	}
}

// InventoryRefused counts a bind refused for a stale inventory
// (Binder.inventoryChanged).
func (m *Metrics) InventoryRefused() {
	if m != nil {
		m.staleBinds.Inc()
	}
}

func (m *Metrics) SetArgsValid(ok bool) {
	if m == nil {
		return
	}
	if ok {
		m.argsValid.Set(1)
	} else {
		m.argsValid.Set(0)
	}
}

func (m *Metrics) ObserveSync(r nodestate.SyncResult, d time.Duration) {
	if m == nil {
		return
	}
	m.syncDuration.Observe(d.Seconds())
	m.assumedPods.Set(float64(r.Assumed))
	for kind, n := range map[string]int{"decoded": r.Decoded, "added": r.Added, "removed": r.Removed,
		"rejected": r.Rejected, "confirmed": r.Confirmed, "dropped": r.Dropped} {
		if n > 0 {
			m.syncChanges.WithLabelValues(kind).Add(float64(n))
		}
	}
}

// cardCollector exports, at scrape time, the per-card usage of the
// ledger's devices that implement device.CardReporter (allocated and total
// memory and cores, sharing pods and the share limit, per card) and the
// number of pods holding such devices per node. Reading at scrape time keeps
// sessions free of metric updates; it takes the ledger's lock once.
type cardCollector struct {
	nodes                                                 *nodestate.Store
	memUsed, memTotal, coresUsed, coresTotal, pods, slots *prometheus.Desc
	nodePods                                              *prometheus.Desc
}

var _ prometheus.Collector = (*cardCollector)(nil)

// CollectCards registers the per-card collector reading the ledger. A nil
// *metrics (no registerer) does nothing.
func (m *Metrics) CollectCards(l *nodestate.Store) {
	if m == nil || m.reg == nil {
		return
	}
	labels := []string{"node", "device", "card", "index"}
	desc := func(name, help string, labels []string) *prometheus.Desc {
		return prometheus.NewDesc(metricsPrefix+name, help, labels, nil)
	}
	c := &cardCollector{
		nodes:      l,
		memUsed:    desc("card_memory_allocated_mib", "GPU memory allocated on the card, MiB.", labels),
		memTotal:   desc("card_memory_capacity_mib", "GPU memory of the card, MiB.", labels),
		coresUsed:  desc("card_cores_allocated", "SM percentage allocated on the card.", labels),
		coresTotal: desc("card_cores_capacity", "SM percentage the card offers (100 per card unless scaled).", labels),
		pods:       desc("card_pods", "Allocations sharing the card.", labels),
		slots:      desc("card_pods_capacity", "Most allocations that may share the card.", labels),
		nodePods:   desc("node_device_pods", "Pods holding cards of a device type on the node.", []string{"node", "device"}),
	}
	if err := m.reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			klog.ErrorS(err, "Failed to register deviceshare card metrics")
		}
	}
}

// Describe sends the collector's descriptors.
func (c *cardCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.memUsed, c.memTotal, c.coresUsed, c.coresTotal, c.pods, c.slots, c.nodePods} {
		ch <- d
	}
}

// Collect sends the current per-card values.
func (c *cardCollector) Collect(ch chan<- prometheus.Metric) {
	c.nodes.EachDevices(func(node, devName string, d device.Devices) {
		r, ok := d.(device.CardReporter)
		if !ok {
			return
		}
		cards, pods := r.CardUsage()
		ch <- prometheus.MustNewConstMetric(c.nodePods, prometheus.GaugeValue, float64(pods), node, devName)
		for _, card := range cards {
			l := []string{node, devName, card.ID, strconv.Itoa(card.Index)}
			ch <- prometheus.MustNewConstMetric(c.memUsed, prometheus.GaugeValue, float64(card.MemoryUsedMiB), l...)
			ch <- prometheus.MustNewConstMetric(c.memTotal, prometheus.GaugeValue, float64(card.MemoryTotalMiB), l...)
			ch <- prometheus.MustNewConstMetric(c.coresUsed, prometheus.GaugeValue, float64(card.CoresUsed), l...)
			ch <- prometheus.MustNewConstMetric(c.coresTotal, prometheus.GaugeValue, float64(card.CoresTotal), l...)
			ch <- prometheus.MustNewConstMetric(c.pods, prometheus.GaugeValue, float64(card.Pods), l...)
			ch <- prometheus.MustNewConstMetric(c.slots, prometheus.GaugeValue, float64(card.MaxPods), l...)
		}
	})
}

// quotaCollector exports, at scrape time, each enforced namespace quota
// limit on a device resource and what the namespace uses of it, as the
// last session counted it (pods holding cards and that session's
// allocations).
type quotaCollector struct {
	watch      *quotawatch.Watch
	used, hard *prometheus.Desc
}

var _ prometheus.Collector = (*quotaCollector)(nil)

// CollectQuotas registers the quota collector. A nil *metrics does nothing.
func (m *Metrics) CollectQuotas(w *quotawatch.Watch) {
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
	for _, s := range c.watch.Samples() {
		ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(s.Used), s.Namespace, s.Quota, s.Resource)
		ch <- prometheus.MustNewConstMetric(c.hard, prometheus.GaugeValue, float64(s.Hard), s.Namespace, s.Quota, s.Resource)
	}
}
