package volcano

import (
	"fmt"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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

// After QuietBuiltinVGPUPodGauges the built-in code's per-pod gauges hold
// at most one series however many pods and cards it records, so its
// per-card ResetDeviceMetrics no longer scans one series per pod and card;
// and they are not exported.
func TestBuiltinVGPUPodGaugesStaySmall(t *testing.T) {
	QuietBuiltinVGPUPodGauges()
	QuietBuiltinVGPUPodGauges() // idempotent
	for c := 0; c < 50; c++ {
		uuid := fmt.Sprintf("GPU-%d", c)
		for p := 0; p < 20; p++ {
			pod := fmt.Sprintf("pod-%d", p)
			builtinvgpu.VGPUPodMemoryAllocated.WithLabelValues(uuid, "n1", pod).Set(1000)
			builtinvgpu.VGPUPodCoreAllocated.WithLabelValues(uuid, "n1", pod).Set(10)
		}
	}
	for name, g := range map[string]*prometheus.GaugeVec{"memory": builtinvgpu.VGPUPodMemoryAllocated, "core": builtinvgpu.VGPUPodCoreAllocated} {
		if n := testutil.CollectAndCount(g); n != 1 {
			t.Errorf("%s gauge holds %d series after 1,000 pod-cards, want 1", name, n)
		}
	}
	builtinvgpu.ResetDeviceMetrics("GPU-0", "n1", 40960)
	if n := testutil.CollectAndCount(builtinvgpu.VGPUPodMemoryAllocated); n != 0 {
		t.Errorf("memory gauge holds %d series after a card's reset, want 0", n)
	}
	families, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if strings.HasSuffix(f.GetName(), "_for_a_certain_pod") || strings.HasPrefix(f.GetName(), "vshare_unexported") {
			t.Errorf("%s is still exported", f.GetName())
		}
	}
}
