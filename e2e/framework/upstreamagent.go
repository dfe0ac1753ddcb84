//go:build e2e

package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// UpstreamPoll is how often an UpstreamAgents node looks for its next pod.
const UpstreamPoll = 100 * time.Millisecond

// upstreamHandshakeEvery is how often a stand-in node writes its handshake:
// Volcano v1.10's built-in vGPU code marks a node's agent deleted when the
// handshake it wrote ("Requesting_") is not answered within 60 s.
const upstreamHandshakeEvery = 20 * time.Second

// UpstreamAgents stand in for volcano-vgpu-device-plugin and the kubelet on
// nodes added with AddUpstreamNode, for throughput only: each node serves
// its oldest pending pod (bind-phase allocating, by volcano.sh/vgpu-time,
// then bind-time), one at a time, looking every UpstreamPoll at what the
// API server shows (through one shared pod informer), and, delay after it
// picked the pod, marks it served (bind-phase success), as upstream's
// agent does at the end of its Allocate. Nodes
// serve in parallel. It checks nothing of the allocation and answers no
// kubelet: the auditor's checks do not apply to these nodes.
type UpstreamAgents struct {
	c     *Cluster
	delay time.Duration
	pods  cache.Indexer
	// ctx lives until Stop: the nodes' stand-ins run in it.
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// Served counts the pods marked served.
	mu     sync.Mutex
	served int
}

// upstreamNodeIndex indexes pods by spec.nodeName.
const upstreamNodeIndex = "node"

// StartUpstreamAgents starts the stand-in's pod informer; AddUpstreamNode
// adds its nodes.
func (c *Cluster) StartUpstreamAgents(ctx context.Context, delay time.Duration) (*UpstreamAgents, error) {
	ctx, cancel := context.WithCancel(ctx)
	f := informers.NewSharedInformerFactory(c.Kube, 0)
	inf := f.Core().V1().Pods().Informer()
	if err := inf.AddIndexers(cache.Indexers{upstreamNodeIndex: func(obj any) ([]string, error) {
		if p, ok := obj.(*v1.Pod); ok && p.Spec.NodeName != "" {
			return []string{p.Spec.NodeName}, nil
		}
		return nil, nil
	}}); err != nil {
		cancel()
		return nil, fmt.Errorf("index pods by node: %w", err)
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		return nil, fmt.Errorf("upstream agents: pod informer did not sync")
	}
	return &UpstreamAgents{c: c, delay: delay, pods: inf.GetIndexer(), ctx: ctx, cancel: cancel}, nil
}

// Stop stops every node's stand-in.
func (u *UpstreamAgents) Stop() {
	u.cancel()
	u.wg.Wait()
}

// Served returns how many pods the stand-ins marked served.
func (u *UpstreamAgents) Served() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.served
}

// AddUpstreamNode creates a kwok node registered as volcano-vgpu-device-plugin
// registers one (six fields per card, no NUMA node: our scheduler binds its
// pods one at a time), with cards cards of memMiB shared ten ways, and
// starts its stand-in.
func (u *UpstreamAgents) AddUpstreamNode(ctx context.Context, name string, cards int, memMiB int64) error {
	var reg strings.Builder
	for i := range cards {
		fmt.Fprintf(&reg, "GPU-%s-%d,10,%d,NVIDIA-A100-SXM4-40GB,true,hami-core:", name, i, memMiB)
	}
	extra := v1.ResourceList{VGPUNumber: *resource.NewQuantity(int64(10*cards), resource.DecimalSI)}
	ann := map[string]string{vgpuproto.AnnotationRegister: reg.String(), vgpuproto.AnnotationHandshake: handshakeNow()}
	if err := u.c.AddNode(ctx, name, extra, ann, nil); err != nil {
		return err
	}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		u.serve(u.ctx, name)
	}()
	return nil
}

func handshakeNow() string {
	return vgpuproto.HandshakeReported + time.Now().Format(vgpuproto.HandshakeLayout)
}

// serve is one node's stand-in: one pod at a time, oldest first.
func (u *UpstreamAgents) serve(ctx context.Context, node string) {
	tick := time.NewTicker(UpstreamPoll)
	defer tick.Stop()
	shook := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if time.Since(shook) > upstreamHandshakeEvery {
			shook = time.Now()
			if err := u.patch(ctx, "nodes", "", node, map[string]string{vgpuproto.AnnotationHandshake: handshakeNow()}); err != nil {
				klog.ErrorS(err, "Upstream stand-in: handshake", "node", node)
			}
		}
		pod := u.oldestPending(node)
		if pod == nil {
			continue
		}
		if u.delay > 0 {
			t := time.NewTimer(u.delay)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
		err := u.patch(ctx, "pods", pod.Namespace, pod.Name, map[string]string{vgpuproto.AnnotationBindPhase: vgpuproto.BindPhaseSuccess})
		if err != nil {
			klog.ErrorS(err, "Upstream stand-in: serve", "pod", klog.KObj(pod), "node", node)
			continue
		}
		u.mu.Lock()
		u.served++
		u.mu.Unlock()
		// Wait until the informer shows the write, so that the next look
		// does not pick the same pod again.
		for ctx.Err() == nil && u.stillPending(pod) {
			select {
			case <-ctx.Done():
			case <-tick.C:
			}
		}
	}
}

// oldestPending is the node's pod upstream's agent would serve next.
func (u *UpstreamAgents) oldestPending(node string) *v1.Pod {
	objs, _ := u.pods.ByIndex(upstreamNodeIndex, node)
	var pending []*v1.Pod
	for _, o := range objs {
		p := o.(*v1.Pod)
		if p.DeletionTimestamp == nil && p.Status.Phase != v1.PodFailed && p.Status.Phase != v1.PodSucceeded &&
			p.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseAllocating {
			pending = append(pending, p)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	num := func(p *v1.Pod, key string) uint64 {
		v, err := strconv.ParseUint(p.Annotations[key], 10, 64)
		if err != nil {
			return ^uint64(0)
		}
		return v
	}
	sort.Slice(pending, func(i, j int) bool {
		a, b := pending[i], pending[j]
		if ta, tb := num(a, vgpuproto.AnnotationTime), num(b, vgpuproto.AnnotationTime); ta != tb {
			return ta < tb
		}
		if ta, tb := num(a, vgpuproto.AnnotationBindTime), num(b, vgpuproto.AnnotationBindTime); ta != tb {
			return ta < tb
		}
		return a.Name < b.Name
	})
	return pending[0]
}

func (u *UpstreamAgents) stillPending(p *v1.Pod) bool {
	obj, ok, _ := u.pods.Get(p)
	if !ok {
		return false
	}
	cur := obj.(*v1.Pod)
	return cur.UID == p.UID && cur.Annotations[vgpuproto.AnnotationBindPhase] == vgpuproto.BindPhaseAllocating
}

// patch merges annotations into a pod or node.
func (u *UpstreamAgents) patch(ctx context.Context, kind, ns, name string, ann map[string]string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	if err != nil {
		return err
	}
	if kind == "nodes" {
		_, err = u.c.Kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	} else {
		_, err = u.c.Kube.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("patch %s %s: %w", kind, name, err)
	}
	return nil
}
