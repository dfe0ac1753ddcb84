package nodelock

import (
	"context"
	"errors"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
)

// A live lock is taken over only when it names another pod that is gone or
// has terminated (HAMi's dangling lock); Acquire never takes it over.
func TestAcquireOrTakeOver(t *testing.T) {
	me := types.NamespacedName{Namespace: "ns", Name: "me"}
	live := Format(now.Add(-time.Minute), types.NamespacedName{Namespace: "ns", Name: "holder"})
	pod := func(phase v1.PodPhase) runtime.Object {
		return &v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "holder"}, Status: v1.PodStatus{Phase: phase}}
	}
	tests := []struct {
		name     string
		lock     string
		holder   runtime.Object
		wantTake bool
	}{
		{name: "holder pending", lock: live, holder: pod(v1.PodPending)},
		{name: "holder running", lock: live, holder: pod(v1.PodRunning)},
		{name: "holder gone", lock: live, wantTake: true},
		{name: "holder failed", lock: live, holder: pod(v1.PodFailed), wantTake: true},
		{name: "holder succeeded", lock: live, holder: pod(v1.PodSucceeded), wantTake: true},
		{name: "time only: no holder to ask", lock: now.Add(-time.Minute).Format(time.RFC3339)},
		{name: "expired", lock: Format(now.Add(-time.Hour), types.NamespacedName{Namespace: "ns", Name: "holder"}), holder: pod(v1.PodPending),
			wantTake: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, takeOver := range []bool{false, true} {
				objs := []runtime.Object{&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{"hami.io/mutex.lock": tc.lock}}}}
				if tc.holder != nil {
					objs = append(objs, tc.holder)
				}
				client := fake.NewSimpleClientset(objs...)
				var err error
				if takeOver {
					err = AcquireOrTakeOver(context.Background(), client, "n1", "hami.io/mutex.lock", me, now, 0, podGone(client))
				} else {
					err = Acquire(context.Background(), client, "n1", "hami.io/mutex.lock", me, now, 0)
				}
				want := tc.wantTake && (takeOver || tc.name == "expired")
				if got := err == nil; got != want {
					t.Fatalf("takeOver=%v: error %v, want taken %v", takeOver, err, want)
				}
				if err != nil && !errors.Is(err, ErrHeld) {
					t.Errorf("takeOver=%v: error %v is not ErrHeld", takeOver, err)
				}
				n, _ := client.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
				if v := n.Annotations["hami.io/mutex.lock"]; want != (v == Format(now, me)) {
					t.Errorf("takeOver=%v: lock %q after the call", takeOver, v)
				}
			}
		})
	}
}

// podGone is the binder's rule: the pod is deleted or has terminated.
func podGone(client *fake.Clientset) HolderGone {
	return func(ctx context.Context, holder types.NamespacedName) (bool, error) {
		p, err := client.CoreV1().Pods(holder.Namespace).Get(ctx, holder.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		return p.Status.Phase == v1.PodSucceeded || p.Status.Phase == v1.PodFailed, nil
	}
}
