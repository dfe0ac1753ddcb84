//go:build e2e

package framework

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// The upstream stand-in serves the node's oldest pending pod, as
// volcano-vgpu-device-plugin's GetPendingPod does: by vgpu-time, then
// bind-time; served, failed, deleting pods and other nodes' pods are not
// pending.
func TestUpstreamOldestPending(t *testing.T) {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{upstreamNodeIndex: func(obj any) ([]string, error) {
		return []string{obj.(*v1.Pod).Spec.NodeName}, nil
	}})
	pod := func(name, node, phase, vgpuTime, bindTime string) *v1.Pod {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(name), Annotations: map[string]string{
			vgpuproto.AnnotationBindPhase: phase, vgpuproto.AnnotationTime: vgpuTime, vgpuproto.AnnotationBindTime: bindTime,
		}}, Spec: v1.PodSpec{NodeName: node}}
	}
	failed := pod("failed", "n1", "allocating", "1", "1")
	failed.Status.Phase = v1.PodFailed
	deleting := pod("deleting", "n1", "allocating", "1", "1")
	deleting.DeletionTimestamp = &metav1.Time{}
	for _, p := range []*v1.Pod{
		pod("later", "n1", "allocating", "20", "20"),
		pod("same-time-later-bind", "n1", "allocating", "10", "12"),
		pod("oldest", "n1", "allocating", "10", "11"),
		pod("served", "n1", "success", "1", "1"),
		pod("other-node", "n2", "allocating", "1", "1"),
		failed, deleting,
	} {
		if err := idx.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	u := &UpstreamAgents{pods: idx}
	if got := u.oldestPending("n1"); got == nil || got.Name != "oldest" {
		t.Errorf("oldest pending on n1: %v, want pod oldest", got)
	}
	if got := u.oldestPending("n3"); got != nil {
		t.Errorf("oldest pending on a node without pods: %s", got.Name)
	}
}
