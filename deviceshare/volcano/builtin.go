package volcano

import (
	"fmt"
	_ "unsafe" // go:linkname

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	_ "volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu" // owns builtinVGPUClient
)

// builtinVGPUClient is the package-level client of Volcano v1.10's built-in
// vGPU device code. That code still runs in our scheduler, outside any
// plugin: the scheduler cache builds its device objects for every node with
// a vGPU registration whenever it builds a NodeInfo (every node update and
// every session's snapshot), and each time it PATCHes the node's handshake
// annotation to "Requesting_<now>", synchronously, through this client
// (rate-limited to 5 requests per second). With 200 nodes that is a
// steady storm of node PATCHes the agents answer with more PATCHes, and
// snapshots that wait on the rate limiter.
//
//go:linkname builtinVGPUClient volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu.kubeClient
var builtinVGPUClient kubernetes.Interface

// BuiltinVGPUClient returns the client Volcano's built-in vGPU device code
// sends its API calls through.
func BuiltinVGPUClient() kubernetes.Interface { return builtinVGPUClient }

// SetBuiltinVGPUClient points the built-in vGPU device code's API calls at
// c. Tests and benchmarks use it to answer them in memory; callers put the
// previous client (BuiltinVGPUClient) back when done. The built-in code
// reads the client without a lock: set it only while nothing calls that
// code.
func SetBuiltinVGPUClient(c kubernetes.Interface) { builtinVGPUClient = c }

// SilenceBuiltinVGPU points the built-in vGPU code's client at an
// in-memory stand-in that accepts node PATCHes without sending them and
// refuses everything else. deviceshare replaces the built-in plugin, so
// nothing else of that code should call the API; if something does, the
// error names why. Node agents then keep their handshake as they last wrote
// it; the vGPU backend still honours a "Deleted_" handshake written by
// another scheduler, and Volcano skips nodes that are not Ready.
func SilenceBuiltinVGPU() {
	c := fake.NewSimpleClientset()
	c.PrependReactor("*", "*", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.GetVerb() == "patch" && action.GetResource().Resource == "nodes" {
			return true, &v1.Node{}, nil
		}
		return true, nil, fmt.Errorf("%s %s: Volcano's built-in vGPU code is disabled in this scheduler (deviceshare replaces it)",
			action.GetVerb(), action.GetResource().Resource)
	})
	builtinVGPUClient = c
}
