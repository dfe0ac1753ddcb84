package bind

import (
	"context"
	"strings"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/protocol/nodelock"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// The binder takes HAMi's lock with the pod's name; a live lock another pod
// holds refuses the bind, unless that pod is gone, which HAMi's scheduler
// treats as a dangling lock and so does the binder (the lock is an agent
// lock, device.Reservation.NodeLocks). A lock the backend's NodeLocker names is
// never taken over that way.
func TestBinderTakesOverDanglingHAMiLock(t *testing.T) {
	holder := types.NamespacedName{Namespace: "ns", Name: "holder"}
	tests := []struct {
		name       string
		holderLive bool
		agent      bool
		wantBound  bool
	}{
		{name: "holder pending: refused", holderLive: true, agent: true},
		{name: "holder gone: taken over", agent: true, wantBound: true},
		{name: "holder gone, not an agent lock: refused"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
				vgpuproto.HAMiNodeLock: nodelock.Format(time.Now().Add(-time.Minute), holder)}}}
			pod := phasePod("a", "")
			objs := []runtime.Object{node, pod}
			if tc.holderLive {
				objs = append(objs, phasePod(holder.Name, "allocating"))
			}
			client := fake.NewSimpleClientset(objs...)
			binder := New(Options{})
			task := vcapi.NewTaskInfo(pod)
			task.NodeName = "n1"
			locks := &NodeLocks{Keys: []string{vgpuproto.HAMiNodeLock}}
			if tc.agent {
				locks.Agent = locks.Keys
			}
			binder.Decisions.Record(pod.UID, Decision{Node: "n1", Annotations: map[string]string{"k": "v"}, Locks: locks, Assumed: true})
			errs := binder.Bind(client, []*vcapi.TaskInfo{task})
			if bound := len(errs) == 0; bound != tc.wantBound {
				t.Fatalf("Bind errors %v, want bound %v", errs, tc.wantBound)
			}
			n, err := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			want := ",ns,holder"
			if tc.wantBound {
				want = ",ns,a"
			}
			if v := n.Annotations[vgpuproto.HAMiNodeLock]; !strings.HasSuffix(v, want) {
				t.Errorf("lock %q after Bind, want one ending %q", v, want)
			}
		})
	}
}
