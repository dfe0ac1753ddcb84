package nodelock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
)

// DefaultTTL is how long a lock holds before it may be taken over, as
// upstream; the scheduler's deviceshare.NodeLockExpiry sets another.
const DefaultTTL = 5 * time.Minute

// ErrHeld is returned by Acquire when another allocation holds the lock.
var ErrHeld = errors.New("node lock is held")

// Lock is a decoded lock value.
type Lock struct {
	// Since is when the lock was taken.
	Since time.Time
	// Pod names the holder when the value carries it ("namespace/name").
	Pod string
}

// Parse decodes a lock value: "<RFC3339 time>" or "<RFC3339 time>,<ns>,<pod>".
func Parse(value string) (Lock, error) {
	parts := strings.Split(value, ",")
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(parts[0]))
	if err != nil {
		return Lock{}, fmt.Errorf("node lock value %q: time must be RFC 3339: %w", value, err)
	}
	l := Lock{Since: t}
	if len(parts) >= 3 {
		l.Pod = parts[1] + "/" + parts[2]
	}
	return l, nil
}

// Format encodes a lock taken at now for pod (empty pod: time only, the
// upstream Volcano form).
func Format(now time.Time, pod types.NamespacedName) string {
	ts := now.UTC().Format(time.RFC3339)
	if pod.Name == "" {
		return ts
	}
	return ts + "," + pod.Namespace + "," + pod.Name
}

// Held reports whether the node carries a lock under key younger than ttl
// (DefaultTTL when ttl is not positive). A malformed value cannot be dated
// and is treated as expired: holding a node forever because of garbage would
// be worse than one racing allocation.
func Held(node *v1.Node, key string, now time.Time, ttl time.Duration) bool {
	if node == nil {
		return false
	}
	value, ok := node.Annotations[key]
	if !ok {
		return false
	}
	l, err := Parse(value)
	if err != nil {
		return false
	}
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	return now.Sub(l.Since) < ttl
}

// Acquire takes the lock on the node for pod. It reads the node, fails with
// ErrHeld if a lock younger than ttl is there (see Held), and otherwise
// writes the lock with the read resourceVersion, so a concurrent writer makes
// it fail with a conflict instead of both succeeding.
func Acquire(ctx context.Context, client kubernetes.Interface, nodeName, key string, pod types.NamespacedName, now time.Time, ttl time.Duration) error {
	return acquire(ctx, client, nodeName, key, pod, now, ttl, nil)
}

// HolderGone reports whether the pod a lock names will never be served
// (deleted, terminated), so its lock may be taken over.
type HolderGone func(ctx context.Context, holder types.NamespacedName) (bool, error)

// AcquireOrTakeOver is Acquire that also takes over a live lock naming
// another pod (HAMi's "<time>,<ns>,<pod>") that gone says will never be
// served, as HAMi's scheduler does with a dangling lock
// (Project-HAMi/HAMi pkg/util/nodelock LockNode). gone is asked only then.
func AcquireOrTakeOver(ctx context.Context, client kubernetes.Interface, nodeName, key string, pod types.NamespacedName, now time.Time, ttl time.Duration, gone HolderGone) error {
	return acquire(ctx, client, nodeName, key, pod, now, ttl, gone)
}

func acquire(ctx context.Context, client kubernetes.Interface, nodeName, key string, pod types.NamespacedName, now time.Time, ttl time.Duration, gone HolderGone) error {
	node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("get node %s to lock %s: %w", nodeName, key, err)
	}
	if Held(node, key, now, ttl) {
		dangling, err := danglingLock(ctx, node.Annotations[key], pod, gone)
		if err != nil {
			return fmt.Errorf("lock %s on node %s (%s): read its holder: %w", key, nodeName, node.Annotations[key], err)
		}
		if !dangling {
			return fmt.Errorf("lock %s on node %s: %w (%s)", key, nodeName, ErrHeld, node.Annotations[key])
		}
	}
	updated := node.DeepCopy()
	if updated.Annotations == nil {
		updated.Annotations = make(map[string]string, 1)
	}
	updated.Annotations[key] = Format(now, pod)
	if _, err := client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		if apierrors.IsConflict(err) {
			return fmt.Errorf("lock %s on node %s: %w (node changed while locking)", key, nodeName, ErrHeld)
		}
		return fmt.Errorf("lock %s on node %s: %w", key, nodeName, err)
	}
	return nil
}

// danglingLock reports, when gone is set, whether the lock value names a
// pod other than pod that gone says will never be served.
func danglingLock(ctx context.Context, value string, pod types.NamespacedName, gone HolderGone) (bool, error) {
	if gone == nil {
		return false, nil
	}
	l, err := Parse(value)
	if err != nil || l.Pod == "" || l.Pod == pod.String() {
		return false, nil
	}
	ns, name, _ := strings.Cut(l.Pod, "/")
	return gone(ctx, types.NamespacedName{Namespace: ns, Name: name})
}

// Release removes the lock if it is still the one taken for pod (or, for a
// time-only value, any lock). It is a no-op when the lock is gone.
func Release(ctx context.Context, client kubernetes.Interface, nodeName, key string, pod types.NamespacedName) error {
	for attempt := 0; attempt < 3; attempt++ {
		node, err := client.CoreV1().Nodes().Get(ctx, nodeName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("get node %s to unlock %s: %w", nodeName, key, err)
		}
		value, ok := node.Annotations[key]
		if !ok {
			return nil
		}
		if l, err := Parse(value); err == nil && l.Pod != "" && pod.Name != "" && l.Pod != pod.String() {
			return nil // someone else's lock now
		}
		updated := node.DeepCopy()
		delete(updated.Annotations, key)
		_, err = client.CoreV1().Nodes().Update(ctx, updated, metav1.UpdateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return fmt.Errorf("unlock %s on node %s: %w", key, nodeName, err)
		}
	}
	return fmt.Errorf("unlock %s on node %s: node kept changing", key, nodeName)
}

// AnnotationTaken is the pod annotation on which this project's scheduler
// records, with the allocation, the node locks its bind takes for the pod:
// their keys, sorted, comma-separated; empty when it takes none (the
// default: node locks are for HAMi's and Volcano's node agents and
// NodeLockEnable). The allocation signature covers it, so a node agent that
// verified the signature knows whether there is a lock to release without
// reading the node: one GET per served pod, and the request that timed out
// first on a loaded API server (make bench-e2e). Other schedulers do not
// write it; without it, or without a signature covering it, an agent reads
// the node as before.
const AnnotationTaken = "vshare.io/node-locks"

// FormatTaken is AnnotationTaken's value for keys.
func FormatTaken(keys []string) string {
	s := slices.Clone(keys)
	slices.Sort(s)
	return strings.Join(slices.Compact(s), ",")
}

// Taken reports whether AnnotationTaken's value names key.
func Taken(value, key string) bool {
	if value == "" {
		return false
	}
	for _, k := range strings.Split(value, ",") {
		if k == key {
			return true
		}
	}
	return false
}
