package allocate_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

const (
	benchClusterPods = 10000
	benchNodePods    = 100
)

// upstreamLookup is the baseline, shaped like upstream's Allocate: one
// list of the cluster's pods per Allocate call. Volcano's device plugin
// (volcano-sh/devices, pkg/plugin/vgpu/plugin.go) starts Allocate with
// util.GetPendingPod(nodename), which (pkg/plugin/vgpu/util/util.go) lists
// every pod in the cluster (Pods("").List with empty ListOptions) and keeps
// the one in bind-phase allocating assigned to the node; HAMi's
// (Project-HAMi/HAMi, pkg/device-plugin/nvidiadevice/nvinternal/plugin/
// server.go) calls getPendingPod once per Allocate too, listing with the
// field selector spec.nodeName. Our allocator asks its lookup several times
// per call (Allocating, Assigned, Active); the baseline answers them all
// from the one list taken at the start of the call (list, timed with the
// call). The list copies every pod, as a List response decodes fresh
// objects; it is a lower bound on upstream's cost, which also pays the API
// round trip, the server's work and the decoding.
type upstreamLookup struct {
	cluster cache.Store
	pods    []*v1.Pod // the node's pods from the last list
}

// list is upstream's one List per Allocate call.
func (l *upstreamLookup) list() {
	l.pods = l.pods[:0]
	for _, obj := range l.cluster.List() {
		if p := obj.(*v1.Pod).DeepCopy(); p.Spec.NodeName == nodeName {
			l.pods = append(l.pods, p)
		}
	}
}

func (l *upstreamLookup) filter(keep func(*v1.Pod) bool) ([]*v1.Pod, error) {
	var out []*v1.Pod
	for _, p := range l.pods {
		if keep(p) {
			out = append(out, p)
		}
	}
	return out, nil
}

func (l *upstreamLookup) Allocating() ([]*v1.Pod, error) {
	return l.filter(func(p *v1.Pod) bool {
		return p.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseAllocating
	})
}

func (l *upstreamLookup) Assigned() ([]*v1.Pod, error) {
	return l.filter(func(p *v1.Pod) bool {
		return p.Annotations[vgpuproto.AnnotationIDs] != "" && p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed
	})
}

func (l *upstreamLookup) Active() ([]*v1.Pod, error) {
	return l.filter(func(p *v1.Pod) bool { return p.Status.Phase != v1.PodSucceeded && p.Status.Phase != v1.PodFailed })
}

// benchCluster fills the node's indexer with benchNodePods pods (99 running
// vGPU pods) and a cluster store with benchClusterPods pods in all.
func benchCluster(b *testing.B, e *env) cache.Store {
	cluster := cache.NewStore(cache.MetaNamespaceKeyFunc)
	for i := 0; i < benchNodePods-1; i++ {
		p := newPod(fmt.Sprintf("running-%d", i)).container("c", 1, nil).
			allocated(entry(e.uuids[i%len(e.uuids)], 400, 0), int64(i)).
			annotate(vgpuproto.AnnotationBindPhase, vgpuproto.BindPhaseSuccess).
			annotate(vgpuproto.AnnotationToAllocate, ";").phase(v1.PodRunning).build()
		e.add(b, p)
		_ = cluster.Add(p)
	}
	for i := 0; i < benchClusterPods-benchNodePods+1; i++ {
		p := newPod(fmt.Sprintf("elsewhere-%d", i)).container("c", 1, nil).
			allocated(entry("GPU-other", 400, 0), int64(i)).
			annotate(vgpuproto.AnnotationNode, "other-node").phase(v1.PodRunning).build()
		p.Spec.NodeName = "other-node"
		_ = cluster.Add(p)
	}
	return cluster
}

func benchmarkAllocate(b *testing.B, baseline bool) {
	var cluster cache.Store
	var upstream *upstreamLookup
	e := newEnv(b, func(c *config.Config, o *allocate.Options) {
		c.NVIDIA.DeviceSplitCount = 20
	})
	cluster = benchCluster(b, e)
	if baseline {
		var err error
		upstream = &upstreamLookup{cluster: cluster}
		e.alloc, err = allocate.New(allocate.Options{
			Node: nodeName, Inventory: e.allocInventory(), Lookup: upstream, Patcher: e.rec,
			LibvgpuHostPath: "/usr/local/vgpu/libvgpu.so", CacheHostDir: e.cache, Clock: e.clock,
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	e.rec.apply = true
	lat := make([]time.Duration, 0, b.N)
	req := request(1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		pod := newPod(fmt.Sprintf("pending-%d", i)).container("c", 1, nil).
			allocated(entry(e.uuids[i%len(e.uuids)], 400, 0), int64(1000+i)).build()
		e.add(b, pod)
		_ = cluster.Add(pod)
		b.StartTimer()
		start := time.Now()
		if upstream != nil {
			upstream.list()
		}
		if _, err := e.alloc.Allocate(context.Background(), req); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		b.StopTimer()
		_ = e.indexer.Delete(pod)
		_ = cluster.Delete(pod)
		e.rec.calls = e.rec.calls[:0]
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds()), "p99-ns")
}

// BenchmarkAllocate: the node-scoped indexer with 100 pods on the node
// (10,000 in the cluster, which the node's informer never holds).
func BenchmarkAllocate(b *testing.B) { benchmarkAllocate(b, false) }

// BenchmarkAllocateListAllBaseline: the same Allocate over a lookup that
// lists all 10,000 pods once per Allocate call, as upstream does
// (upstreamLookup).
func BenchmarkAllocateListAllBaseline(b *testing.B) { benchmarkAllocate(b, true) }
