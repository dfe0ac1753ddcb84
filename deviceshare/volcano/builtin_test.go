package volcano

import (
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	builtinvgpu "volcano.sh/volcano/pkg/scheduler/api/devices/nvidia/vgpu"
)

// Volcano's built-in vGPU code, which the scheduler cache runs for every
// NodeInfo it builds, sends its handshake PATCH to the stand-in: nothing
// reaches the API server, and the node's devices are still decoded.
func TestBuiltinVGPUHandshakeIsSilenced(t *testing.T) {
	saved := BuiltinVGPUClient()
	t.Cleanup(func() { SetBuiltinVGPUClient(saved) })
	SilenceBuiltinVGPU()
	c, ok := BuiltinVGPUClient().(*fake.Clientset)
	if !ok {
		t.Fatalf("the built-in vGPU client is %T, want the in-memory stand-in", BuiltinVGPUClient())
	}
	node := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		builtinvgpu.VolcanoVGPURegister:  "GPU-0,10,40960,NVIDIA-A100,true:",
		builtinvgpu.VolcanoVGPUHandshake: "Reported_2026.11.22 05:00:00",
	}}}
	devs := builtinvgpu.NewGPUDevices("n1", node)
	if devs == nil || len(devs.Device) != 1 {
		t.Fatalf("built-in NewGPUDevices = %+v, want the node's one card", devs)
	}
	var patches int
	for _, a := range c.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "nodes" {
			patches++
		}
	}
	if patches != 1 {
		t.Errorf("the built-in code's handshake PATCH went to the stand-in %d times, want 1 (actions %v)", patches, c.Actions())
	}
}
