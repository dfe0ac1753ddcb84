package allocate

import (
	"fmt"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/nodeagent/allocation"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Index names of the node's pod indexer.
const (
	// IndexBindPhase indexes pods by volcano.sh/bind-phase.
	IndexBindPhase = "vgpu-bind-phase"
	// IndexAssigned indexes non-terminal pods that hold a vGPU allocation
	// (volcano.sh/vgpu-ids-new) under the key "assigned".
	IndexAssigned = "vgpu-assigned"
	// IndexUID indexes pods by UID (used by the metrics exporter).
	IndexUID = "uid"
	assigned = "assigned"
)

// PodLookup finds the node's vGPU pods. It must be cheap: Allocate calls it
// on every request.
type PodLookup interface {
	// Allocating returns the pods in bind-phase allocating.
	Allocating() ([]*v1.Pod, error)
	// Assigned returns the non-terminal pods holding a vGPU allocation.
	Assigned() ([]*v1.Pod, error)
	// Active returns the node's non-terminal pods.
	Active() ([]*v1.Pod, error)
}

// Patcher writes the protocol's annotations (the node agent kit's).
type Patcher = allocation.Patcher

// Indexers are the indexes IndexerLookup needs; add them to the node's pod
// informer before it starts.
func Indexers() cache.Indexers {
	return cache.Indexers{
		IndexBindPhase: func(obj any) ([]string, error) {
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return nil, nil
			}
			if phase := pod.Annotations[vgpuproto.AnnotationBindPhase]; phase != "" {
				return []string{phase}, nil
			}
			return nil, nil
		},
		IndexAssigned: func(obj any) ([]string, error) {
			pod, ok := obj.(*v1.Pod)
			if !ok || pod.Annotations[vgpuproto.AnnotationIDs] == "" || allocation.Terminal(pod) {
				return nil, nil
			}
			return []string{assigned}, nil
		},
		IndexUID: func(obj any) ([]string, error) {
			pod, ok := obj.(*v1.Pod)
			if !ok {
				return nil, nil
			}
			return []string{string(pod.UID)}, nil
		},
	}
}

// IndexerLookup is a PodLookup over an indexer holding this node's pods
// (an informer's GetIndexer() with Indexers added).
type IndexerLookup struct {
	Indexer cache.Indexer
}

var _ PodLookup = IndexerLookup{}

// Allocating implements PodLookup.
func (l IndexerLookup) Allocating() ([]*v1.Pod, error) {
	return l.byIndex(IndexBindPhase, vgpuproto.BindPhaseAllocating)
}

// Assigned implements PodLookup.
func (l IndexerLookup) Assigned() ([]*v1.Pod, error) {
	return l.byIndex(IndexAssigned, assigned)
}

// Active implements PodLookup: a node has at most a few hundred pods.
func (l IndexerLookup) Active() ([]*v1.Pod, error) {
	objs := l.Indexer.List()
	pods := make([]*v1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*v1.Pod); ok && !allocation.Terminal(p) {
			pods = append(pods, p)
		}
	}
	return pods, nil
}

func (l IndexerLookup) byIndex(index, key string) ([]*v1.Pod, error) {
	objs, err := l.Indexer.ByIndex(index, key)
	if err != nil {
		return nil, fmt.Errorf("look up pods by %s=%s: %w", index, key, err)
	}
	return allocation.Pods(objs), nil
}

// ByUID returns the node's pod with the UID.
func (l IndexerLookup) ByUID(uid string) (*v1.Pod, bool) {
	objs, err := l.Indexer.ByIndex(IndexUID, uid)
	if err != nil || len(objs) == 0 {
		return nil, false
	}
	p, ok := objs[0].(*v1.Pod)
	return p, ok
}
