package allocate

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"
)

// SignedAnnotations are the allocation annotations an allocation signature
// must cover: those the scheduler writes and nobody rewrites after bind. They
// are backends/vgpu's Backend.SignedAnnotations (a test keeps the two equal).
var SignedAnnotations = []string{AnnotationIDs, AnnotationNode, AnnotationTime, AnnotationBindTime}

// trusted checks who made the pod's allocation, before anything in it is
// believed: the pod must have been placed by an allowed scheduler and, when
// the agent holds allocation keys, carry a signature by one of them over its
// UID, this node and SignedAnnotations. Anyone who can create pods can write
// annotations and spec.nodeName; only the scheduler holds the key.
func (a *Allocator) trusted(pod *v1.Pod, ref string) error {
	if names := a.opts.SchedulerNames; len(names) > 0 && !slices.Contains(names, pod.Spec.SchedulerName) {
		return fmt.Errorf("pod %s: spec.schedulerName %q is not one of the schedulers this agent serves (%v): %w",
			ref, pod.Spec.SchedulerName, names, ErrForged)
	}
	if a.opts.Keys == nil {
		return nil
	}
	keys, err := a.opts.Keys()
	if err != nil {
		klog.ErrorS(err, "Allocation key file cannot be reloaded; verifying with the last good keys", "node", a.opts.Node)
	}
	if err := keys.Verify(string(pod.UID), a.opts.Node, pod.Annotations, SignedAnnotations); err != nil {
		return fmt.Errorf("pod %s: %w: %w", ref, err, ErrForged)
	}
	return nil
}
