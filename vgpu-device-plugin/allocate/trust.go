package allocate

import (
	"fmt"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
)

// SignedAnnotations are the allocation annotations an allocation signature
// must cover: those the scheduler writes and nobody rewrites after bind. They
// are backends/vgpu's Backend.SignedAnnotations (a test keeps the two equal).
var SignedAnnotations = []string{vgpuproto.AnnotationIDs, vgpuproto.AnnotationNode, vgpuproto.AnnotationTime, vgpuproto.AnnotationBindTime}

// unambiguous refuses to serve candidate c when another pod on the node
// may be the one the kubelet is admitting. The kubelet's Allocate names no
// pod: the protocol serves the oldest pending allocation with as many cards,
// which is right only if every pod asking for cards here got its allocation
// from the scheduler (the scheduler keeps one pending per node). A pod that
// asks for n cards, was never seen by this agent (no bind-phase) and is
// young enough to be in admission was placed by someone else (a user setting
// spec.nodeName, another scheduler): serving c now could hand c's cards to
// it. Both admissions are refused until it is gone (the kubelet fails its
// admission, or it ages past StaleAfter); a Warning event on it says why.
func (a *Allocator) unambiguous(c *candidate, inv *nvidia.Inventory, n int, now time.Time) error {
	pods, err := a.opts.Lookup.Active()
	if err != nil {
		return fmt.Errorf("find the node's pods: %w", err)
	}
	var others []string
	for _, p := range pods {
		if p.UID == c.Pod.UID || p.DeletionTimestamp != nil || !inAdmission(p, now, a.opts.StaleAfter) ||
			!asksFor(p, inv.NVIDIA.ResourceCountName, n) {
			continue
		}
		others = append(others, klog.KObj(p).String())
		a.warn(p, now)
	}
	if len(others) == 0 {
		return nil
	}
	return fmt.Errorf("node %s: a request for %d cards could be pod %s's pending allocation or the admission of %s, "+
		"which ask for vGPUs without an allocation by the scheduler; refused until they are gone: %w",
		a.opts.Node, n, klog.KObj(c.Pod), strings.Join(others, ", "), ErrAmbiguous)
}

// inAdmission reports whether the pod may still be in the kubelet's
// admission without this agent having served it: no bind-phase, created less
// than staleAfter ago.
func inAdmission(p *v1.Pod, now time.Time, staleAfter time.Duration) bool {
	switch p.Annotations[vgpuproto.AnnotationBindPhase] {
	case vgpuproto.BindPhaseAllocating, vgpuproto.BindPhaseSuccess, vgpuproto.BindPhaseFailed:
		return false
	}
	return now.Sub(p.CreationTimestamp.Time) < staleAfter
}

// asksFor reports whether a container or init container of the pod asks
// for n of resource: the kubelet calls Allocate for either.
func asksFor(p *v1.Pod, resource string, n int) bool {
	for _, cs := range [][]v1.Container{p.Spec.Containers, p.Spec.InitContainers} {
		for i := range cs {
			if v, ok := limit(&cs[i], resource); ok && v == int64(n) {
				return true
			}
		}
	}
	return false
}

// warn records, at most once per StaleAfter, a Warning event on a pod that
// asks for vGPUs without an allocation by the scheduler.
func (a *Allocator) warn(p *v1.Pod, now time.Time) {
	if _, done := a.warned[p.UID]; done {
		return
	}
	a.warned[p.UID] = now
	klog.InfoS("Pod asks for vGPUs without an allocation by the scheduler; refusing Allocate on the node while it may be in admission",
		"pod", klog.KObj(p), "node", a.opts.Node, "schedulerName", p.Spec.SchedulerName)
	if a.opts.Events != nil {
		a.opts.Events.Eventf(p, v1.EventTypeWarning, EventAllocationFailed,
			"node %s gives no devices: the pod asks for vGPUs but has no allocation by the scheduler (spec.schedulerName %q); "+
				"vGPU admissions on this node are refused while it may be in admission", a.opts.Node, p.Spec.SchedulerName)
	}
}
