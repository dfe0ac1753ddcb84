package volcano

import (
	"fmt"
	"sync"
	_ "unsafe" // go:linkname

	"github.com/prometheus/client_golang/prometheus"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	builtinvgpu "volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu" // owns builtinVGPUClient
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

var quietOnce sync.Once

// QuietBuiltinVGPUPodGauges stops the upkeep of the built-in vGPU code's two
// per-pod gauges (volcano_vgpu_device_memory_allocation_for_a_certain_pod
// and ..._core_...), whose cost grows with the square of the cluster. That
// code runs in every NodeInfo Volcano builds (each node update and each
// session's snapshot of every node): NewGPUDevices calls ResetDeviceMetrics
// per card, whose DeletePartialMatch scans every series of both gauges, and
// each pod holding cards adds a series per card. Every snapshot thus costs
// cards x (pod, card) pairs label matches: perf of make bench-e2e at 200
// nodes and 2,000 vGPU pods put it at a fifth of the scheduler's CPU. The
// gauges describe the built-in plugin's view, which deviceshare replaces
// (its own metrics and the node agent's cover allocations per pod), so they
// are taken off the default registry and replaced by gauges whose labels
// are all constrained to "": at most one series, never exported. Safe to
// call more than once; call it before the scheduler runs.
func QuietBuiltinVGPUPodGauges() {
	quietOnce.Do(func() {
		blank := func(string) string { return "" }
		for _, g := range []**prometheus.GaugeVec{&builtinvgpu.VGPUPodMemoryAllocated, &builtinvgpu.VGPUPodCoreAllocated} {
			prometheus.DefaultRegisterer.Unregister(*g)
			*g = prometheus.V2.NewGaugeVec(prometheus.GaugeVecOpts{
				GaugeOpts: prometheus.GaugeOpts{Name: "vshare_unexported_builtin_vgpu_pod_gauge", Help: "not exported"},
				VariableLabels: prometheus.ConstrainedLabels{
					{Name: "devID", Constraint: blank}, {Name: "NodeName", Constraint: blank}, {Name: "podName", Constraint: blank},
				},
			})
		}
	})
}
