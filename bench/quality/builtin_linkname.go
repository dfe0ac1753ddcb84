package quality

import (
	"encoding/json"
	"fmt"
	"sync"
	_ "unsafe" // go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	_ "volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu" // owns builtinKubeClient
)

// builtinKubeClient is the package-level client of Volcano v1.10's built-in
// vGPU device code: NewGPUDevices PATCHes the node's handshake annotation
// and Allocate PATCHes the pod's assignment annotations through it (not
// through the client it is given). The built-in policies point it at
// builtinClient while they call that code, and put the previous client
// back afterwards (deviceshare/builtin.go links the same symbol for the
// scheduler).
//
//go:linkname builtinKubeClient volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu.kubeClient
var builtinKubeClient kubernetes.Interface

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
