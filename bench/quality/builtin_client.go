package quality

import (
	"encoding/json"
	"fmt"
	"sync"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The built-in vGPU device code of Volcano v1.10 sends its API calls
// through a package-level client, not the one it is given: NewGPUDevices
// PATCHes the node's handshake annotation and Allocate PATCHes the pod's
// assignment annotations. deviceshare/volcano reaches that client (it is
// the one place that knows where Volcano keeps it); the built-in policies
// point it at builtinClient while they call that code, and put the
// previous client back afterwards.

var (
	builtinClientOnce sync.Once
	builtinClientVal  kubernetes.Interface
	// builtinPatches holds the annotations of every pod PATCH the built-in
	// code sent, by "namespace/name", until the policy takes them: they
	// are what the scheduler cache would see when the informer delivers
	// the patched pod.
	builtinPatches sync.Map
)

// builtinClient is an in-memory clientset that accepts node PATCHes (the
// handshake), records pod PATCHes in builtinPatches and refuses anything
// else, so that the built-in code never reaches a real API server.
func builtinClient() kubernetes.Interface {
	builtinClientOnce.Do(func() {
		c := fake.NewSimpleClientset()
		c.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
			patch, ok := action.(k8stesting.PatchAction)
			switch {
			case ok && action.GetResource().Resource == "nodes":
				return true, &v1.Node{}, nil
			case ok && action.GetResource().Resource == "pods":
				var body struct {
					Metadata struct {
						Annotations map[string]string `json:"annotations"`
					} `json:"metadata"`
				}
				if err := json.Unmarshal(patch.GetPatch(), &body); err != nil {
					return true, nil, fmt.Errorf("patch pod %s/%s: %w", patch.GetNamespace(), patch.GetName(), err)
				}
				builtinPatches.Store(patch.GetNamespace()+"/"+patch.GetName(), body.Metadata.Annotations)
				return true, &v1.Pod{}, nil
			}
			return true, nil, fmt.Errorf("%s %s: not served by the simulator's in-memory client",
				action.GetVerb(), action.GetResource().Resource)
		})
		builtinClientVal = c
	})
	return builtinClientVal
}
