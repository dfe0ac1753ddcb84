package nodeannot

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestDiff(t *testing.T) {
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "7", Annotations: map[string]string{"a": "1", "b": "old"}}}
	desired := map[string]string{"a": "1", "b": "new", "c": "3"}

	patch, current := Diff(node, "", nil, desired)
	if diff := cmp.Diff(map[string]string{"b": "new", "c": "3"}, patch); diff != "" {
		t.Errorf("patch (-want +got):\n%s", diff)
	}
	current["x"] = "y"
	if _, ok := node.Annotations["x"]; ok {
		t.Error("current aliases the node's annotations")
	}

	// The informer still shows resourceVersion 7, at which we patched b and
	// c: nothing to write again.
	patch, _ = Diff(node, "7", map[string]string{"b": "new", "c": "3"}, desired)
	if len(patch) != 0 {
		t.Errorf("patch %v after our own patch at the shown resourceVersion, want none", patch)
	}
	// A newer node (someone else wrote) is read as it is.
	node.ResourceVersion = "8"
	patch, _ = Diff(node, "7", map[string]string{"b": "new", "c": "3"}, desired)
	if diff := cmp.Diff(map[string]string{"b": "new", "c": "3"}, patch); diff != "" {
		t.Errorf("patch after a newer node (-want +got):\n%s", diff)
	}
	if _, current := Diff(&v1.Node{}, "", nil, nil); current == nil {
		t.Error("current is nil for a node without annotations")
	}
}
