package deviceshare

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	v1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"

	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func TestVGPUCardMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	st := newTestState(Options{Clock: testingclock.NewFakeClock(testTime), Registerer: reg})
	defer st.Close()
	backends, err := registry.Build(pluginargs.Args{VGPUEnable: true}, nil, st.clock)
	if err != nil {
		t.Fatal(err)
	}
	node := vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})
	ni := vcapi.NewNodeInfo(node)
	pod := vgpuPod("a", "pg1", 1, 4000, 30)
	pod.Spec.NodeName = "n1"
	pod.Status.Phase = v1.PodRunning
	pod.Annotations[vgpuproto.AnnotationIDs] = "GPU-1,NVIDIA,4000,30:"
	if err := ni.AddTask(vcapi.NewTaskInfo(pod)); err != nil {
		t.Fatal(err)
	}
	st.nodes.Sync(map[string]*vcapi.NodeInfo{"n1": ni}, backends)

	want := `
# HELP volcano_deviceshare_card_cores_allocated SM percentage allocated on the card.
# TYPE volcano_deviceshare_card_cores_allocated gauge
volcano_deviceshare_card_cores_allocated{card="GPU-0",device="hamivgpu",index="0",node="n1"} 0
volcano_deviceshare_card_cores_allocated{card="GPU-1",device="hamivgpu",index="1",node="n1"} 30
# HELP volcano_deviceshare_card_memory_allocated_mib GPU memory allocated on the card, MiB.
# TYPE volcano_deviceshare_card_memory_allocated_mib gauge
volcano_deviceshare_card_memory_allocated_mib{card="GPU-0",device="hamivgpu",index="0",node="n1"} 0
volcano_deviceshare_card_memory_allocated_mib{card="GPU-1",device="hamivgpu",index="1",node="n1"} 4000
# HELP volcano_deviceshare_card_memory_capacity_mib GPU memory of the card, MiB.
# TYPE volcano_deviceshare_card_memory_capacity_mib gauge
volcano_deviceshare_card_memory_capacity_mib{card="GPU-0",device="hamivgpu",index="0",node="n1"} 16000
volcano_deviceshare_card_memory_capacity_mib{card="GPU-1",device="hamivgpu",index="1",node="n1"} 16000
# HELP volcano_deviceshare_card_pods Allocations sharing the card.
# TYPE volcano_deviceshare_card_pods gauge
volcano_deviceshare_card_pods{card="GPU-0",device="hamivgpu",index="0",node="n1"} 0
volcano_deviceshare_card_pods{card="GPU-1",device="hamivgpu",index="1",node="n1"} 1
# HELP volcano_deviceshare_node_device_pods Pods holding cards of a device type on the node.
# TYPE volcano_deviceshare_node_device_pods gauge
volcano_deviceshare_node_device_pods{device="hamivgpu",node="n1"} 1
`
	names := []string{"volcano_deviceshare_card_cores_allocated", "volcano_deviceshare_card_memory_allocated_mib",
		"volcano_deviceshare_card_memory_capacity_mib", "volcano_deviceshare_card_pods", "volcano_deviceshare_node_device_pods"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Error(err)
	}
}
