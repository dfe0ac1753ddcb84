package agent_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin/fakekubelet"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/agent"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

type nopPatcher struct{}

func (nopPatcher) PatchPodAnnotations(context.Context, *v1.Pod, map[string]string) error { return nil }
func (nopPatcher) ReleaseNodeLock(context.Context, *v1.Pod) error                        { return nil }

func scheduledPod(name, ids string) *v1.Pod {
	return &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{
			vgpuproto.AnnotationIDs: ids, vgpuproto.AnnotationToAllocate: ids, vgpuproto.AnnotationNode: "n1",
			vgpuproto.AnnotationTime: "1", vgpuproto.AnnotationBindPhase: vgpuproto.BindPhaseAllocating,
			vgpuproto.AnnotationBindTime: strconv.FormatInt(time.Now().Unix(), 10),
		}},
		Spec: v1.PodSpec{NodeName: "n1", Containers: []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{
			Limits: v1.ResourceList{
				"volcano.sh/vgpu-number": *resource.NewQuantity(1, resource.DecimalSI),
				"volcano.sh/vgpu-memory": *resource.NewQuantity(8000, resource.DecimalSI),
				"volcano.sh/vgpu-cores":  *resource.NewQuantity(25, resource.DecimalSI),
			}}}}},
	}
}

// TestAllocateOverGRPC runs the kubelet's view: registration with a fake
// kubelet, the advertised virtual devices, then Allocate through the socket
// for a scheduled pod and for a forged one.
func TestAllocateOverGRPC(t *testing.T) {
	cfg := config.Default()
	cfg.NVIDIA.DeviceSplitCount = 4
	a := serveAgent(t, cfg)
	gpus, indexer, p := a.gpus, a.indexer, a.plugin
	client := pluginapi.NewDevicePluginClient(fakekubelet.Dial(t, p.SocketPath()))
	stream, err := client.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	list, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Devices) != 32 || list.Devices[5].ID != gpus[1].UUID+"-1" || list.Devices[5].Topology.Nodes[0].ID != 0 {
		t.Fatalf("advertised %d devices, device 5 = %v; want 8 H100 x 4 named <UUID>-<i> with NUMA", len(list.Devices), list.Devices[5])
	}

	if err := indexer.Add(scheduledPod("ok", fmt.Sprintf("%s,NVIDIA,8000,25:", gpus[3].UUID))); err != nil {
		t.Fatal(err)
	}
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: []string{list.Devices[0].ID}}}}
	resp, err := client.Allocate(context.Background(), req)
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	env := resp.ContainerResponses[0].Envs
	if env["NVIDIA_VISIBLE_DEVICES"] != gpus[3].UUID || env["CUDA_DEVICE_MEMORY_LIMIT_0"] != "8000m" || env["CUDA_DEVICE_SM_LIMIT"] != "25" {
		t.Errorf("env = %v", env)
	}

	forged := scheduledPod("forged", "GPU-00000000-0000-0000-0000-000000000000,NVIDIA,8000,0:")
	if err := indexer.Add(forged); err != nil {
		t.Fatal(err)
	}
	_, err = client.Allocate(context.Background(), req)
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(err.Error(), "is not registered on node n1") {
		t.Errorf("forged allocation: err = %v, want PermissionDenied naming the card", err)
	}
}

// servedAgent is an agent on a DGX H100 (nvmlmock) with cfg, registered with
// a fake kubelet, serving until the test ends.
type servedAgent struct {
	inv     *nvidia.Inventory
	gpus    []nvidia.GPU
	indexer cache.Indexer
	plugin  *deviceplugin.Plugin
}

func serveAgent(t *testing.T, cfg *config.Config) servedAgent {
	t.Helper()
	srv, err := nvmlmock.New("dgxh100")
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := nvidia.Discover(srv)
	if err != nil {
		t.Fatal(err)
	}
	inv := nvidia.NewInventory("n1", gpus, cfg, nvidia.UnitMiB)
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, allocate.Indexers())
	alloc, err := allocate.New(allocate.Options{
		Node: "n1", Inventory: func() *nvidia.Inventory { return inv }, Lookup: allocate.IndexerLookup{Indexer: indexer},
		Patcher: nopPatcher{}, LibvgpuHostPath: "/opt/vgpu/libvgpu.so", CacheHostDir: t.TempDir(),
	})
	if err != nil {
		t.Fatal(err)
	}
	dir := fakekubelet.ShortTempDir(t)
	kubelet := fakekubelet.Start(t, dir)
	t.Cleanup(kubelet.Stop)
	never := make(chan struct{})
	p, err := deviceplugin.New(deviceplugin.Options{
		ResourceName: "volcano.sh/vgpu-number", SocketDir: dir, SocketName: agent.DefaultSocketName, Allocator: alloc,
		Devices: func() []*pluginapi.Device {
			return agent.VirtualDevices(inv, func(string) bool { return true }, true)
		},
		Changed: func() <-chan struct{} { return never },
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	kubelet.Wait(t)
	return servedAgent{inv: inv, gpus: gpus, indexer: indexer, plugin: p}
}
