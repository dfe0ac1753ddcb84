package kube

import (
	"context"
	"errors"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NodePods reads the current revision with a list of the kube-node-lease
// namespace's pods (none), then the node's pods; when the API server
// refuses either read, it reads the node's pods once more (the quorum list)
// and still answers. (The fake client ignores resourceVersion and its match,
// so what each read returns is the e2e suite's to check, against a real API
// server: its agents use NodePods.)
func TestNodePodsFallsBackToTheQuorumList(t *testing.T) {
	for _, tc := range []struct {
		name       string
		failProbe  bool
		failCached bool
		wantReads  int // lists of the node's pods
	}{
		{name: "probe and cached list", wantReads: 1},
		{name: "cached list refused", failCached: true, wantReads: 2},
		{name: "probe refused", failProbe: true, wantReads: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewSimpleClientset(&v1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}, Spec: v1.PodSpec{NodeName: "n1"}})
			probes, reads := 0, 0
			client.PrependReactor("list", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
				if a.GetNamespace() == v1.NamespaceNodeLease {
					probes++
					if tc.failProbe {
						return true, nil, errors.New("probe refused")
					}
					return true, &v1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "42"}}, nil
				}
				reads++
				if reads == 1 && tc.failCached && !tc.failProbe {
					return true, nil, errors.New("Too large resource version")
				}
				return false, nil, nil
			})
			pods, err := NodePods(client, "n1")(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(pods) != 1 || pods[0].Name != "a" {
				t.Errorf("pods = %v, want [a]", pods)
			}
			if probes != 1 || reads != tc.wantReads {
				t.Errorf("probes %d, node lists %d; want 1, %d", probes, reads, tc.wantReads)
			}
		})
	}
}
