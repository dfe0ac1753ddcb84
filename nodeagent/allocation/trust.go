package allocation

import (
	"fmt"
	"slices"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/internal/allocsig"
)

// Trust decides whose allocations an agent believes. Anyone who can create
// pods can write annotations and spec.nodeName; only the scheduler holds
// the allocation key.
type Trust struct {
	// SchedulerNames, when not empty, are the spec.schedulerName values
	// whose pods get devices.
	SchedulerNames []string
	// Keys returns the allocation keys in force and the error of their
	// last reload, if it failed; with Keys set, only allocations signed by
	// one of them are served. nil serves unsigned allocations.
	Keys func() (*allocsig.Keyring, error)
	// Signed are the annotations a signature covers, with the pod's UID
	// and the node.
	Signed []string
}

// Check refuses (ErrForged) a pod not placed by an allowed scheduler or,
// with Keys, not carrying a signature by one of them over its UID, node and
// the Signed annotations. ref names the pod in errors.
func (t Trust) Check(pod *v1.Pod, node, ref string) error {
	if names := t.SchedulerNames; len(names) > 0 && !slices.Contains(names, pod.Spec.SchedulerName) {
		return fmt.Errorf("pod %s: spec.schedulerName %q is not one of the schedulers this agent serves (%v): %w",
			ref, pod.Spec.SchedulerName, names, ErrForged)
	}
	if t.Keys == nil {
		return nil
	}
	keys, err := t.Keys()
	if err != nil {
		klog.ErrorS(err, "Allocation key file cannot be reloaded; verifying with the last good keys", "node", node)
	}
	if err := keys.Verify(string(pod.UID), node, pod.Annotations, t.Signed); err != nil {
		return fmt.Errorf("pod %s: %w: %w", ref, err, ErrForged)
	}
	return nil
}

// LoadKeys opens the allocation key file (--allocation-key-file): the keys
// allocations must be signed with, reloaded when the file changes (see
// allocsig.OpenFile).
func LoadKeys(path string) (func() (*allocsig.Keyring, error), error) {
	keys, err := allocsig.OpenFile(path)
	if err != nil {
		return nil, err
	}
	ring, _ := keys.Keys()
	klog.InfoS("Serving only signed allocations", "keyFile", path, "keys", ring.IDs())
	return keys.Keys, nil
}
