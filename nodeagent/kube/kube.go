package kube

import (
	"context"
	"encoding/json"
	"fmt"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/nodeagent/registrar"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

// NewPodInformer watches only the pods bound to node; ctx bounds its API
// calls. Add the indexes the agent's pod lookup needs before it starts.
// listed, when not nil, is called at each list the informer makes (the
// first, and each after a watch could not resume: events between the two
// may not be delivered; see allocation.Journal).
func NewPodInformer(ctx context.Context, client kubernetes.Interface, node string, listed func()) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			if listed != nil {
				listed()
			}
			o.FieldSelector = selector
			return client.CoreV1().Pods(v1.NamespaceAll).List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().Pods(v1.NamespaceAll).Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(lw, &v1.Pod{}, 0, cache.Indexers{})
}

// NodePods returns a function listing the pods bound to node from the API
// server (a quorum read, not a cache), for an Allocate that must know what
// is pending now (the vGPU agent's allocate.Options.LivePods).
func NodePods(client kubernetes.Interface, node string) func(context.Context) ([]*v1.Pod, error) {
	selector := fields.OneTermEqualSelector("spec.nodeName", node).String()
	return func(ctx context.Context) ([]*v1.Pod, error) {
		list, err := client.CoreV1().Pods(v1.NamespaceAll).List(ctx, metav1.ListOptions{FieldSelector: selector})
		if err != nil {
			return nil, fmt.Errorf("list the pods of node %s: %w", node, err)
		}
		out := make([]*v1.Pod, len(list.Items))
		for i := range list.Items {
			out[i] = &list.Items[i]
		}
		return out, nil
	}
}

// NewNodeInformer watches only the named node; ctx bounds its API calls.
func NewNodeInformer(ctx context.Context, client kubernetes.Interface, node string) cache.SharedIndexInformer {
	selector := fields.OneTermEqualSelector("metadata.name", node).String()
	lw := &cache.ListWatch{
		ListFunc: func(o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return client.CoreV1().Nodes().List(ctx, o)
		},
		WatchFunc: func(o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return client.CoreV1().Nodes().Watch(ctx, o)
		},
	}
	return cache.NewSharedIndexInformer(lw, &v1.Node{}, 0, cache.Indexers{})
}

// Patcher writes pod and node annotations through the API server.
type Patcher struct {
	Client kubernetes.Interface
	// Node is this node's name; LockName the node lock annotation key.
	Node, LockName string
}

var (
	_ allocation.Patcher    = Patcher{}
	_ registrar.NodePatcher = Patcher{}
)

// annotationPatch is a merge patch of metadata.annotations; a UID makes the
// API server refuse it for a replaced object.
func annotationPatch(uid types.UID, annotations map[string]string) ([]byte, error) {
	meta := map[string]any{"annotations": annotations}
	if uid != "" {
		meta["uid"] = uid
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

// PatchPodAnnotations implements allocation.Patcher.
func (p Patcher) PatchPodAnnotations(ctx context.Context, pod *v1.Pod, annotations map[string]string) error {
	body, err := annotationPatch(pod.UID, annotations)
	if err != nil {
		return fmt.Errorf("encode patch for pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	if _, err := p.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	return nil
}

// ReleaseNodeLock implements allocation.Patcher.
func (p Patcher) ReleaseNodeLock(ctx context.Context, pod *v1.Pod) error {
	return nodelock.Release(ctx, p.Client, p.Node, p.LockName, types.NamespacedName{Namespace: pod.Namespace, Name: pod.Name})
}

// PatchNodeAnnotations implements registrar.NodePatcher.
func (p Patcher) PatchNodeAnnotations(ctx context.Context, node string, annotations map[string]string) error {
	body, err := annotationPatch("", annotations)
	if err != nil {
		return fmt.Errorf("encode patch for node %s: %w", node, err)
	}
	if _, err := p.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("patch node %s: %w", node, err)
	}
	return nil
}
