package allocate_test

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

const nodeName = "gpu-node-1"

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// patch is one recorded Patcher call.
type patch struct {
	Pod         string
	Annotations map[string]string // nil for a lock release
}

// recorder is the test's Patcher: it records calls and can apply pod patches
// to the indexer, as the informer eventually would.
type recorder struct {
	mu      sync.Mutex
	calls   []patch
	indexer cache.Indexer
	apply   bool
	failFor string // pod name whose patches fail
}

func (r *recorder) PatchPodAnnotations(_ context.Context, pod *v1.Pod, ann map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if pod.Name == r.failFor {
		return context.DeadlineExceeded
	}
	r.calls = append(r.calls, patch{Pod: pod.Name, Annotations: ann})
	if r.apply {
		cp := pod.DeepCopy()
		for k, v := range ann {
			cp.Annotations[k] = v
		}
		return r.indexer.Update(cp)
	}
	return nil
}

func (r *recorder) ReleaseNodeLock(_ context.Context, pod *v1.Pod) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, patch{Pod: pod.Name})
	return nil
}

func (r *recorder) Calls() []patch {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]patch(nil), r.calls...)
}

// env is a node with the dgxa100 mock's 8 A100s and an allocator over a real
// client-go indexer.
type env struct {
	srv       *nvmlmock.Server
	inv       *nvidia.Inventory
	uuids     []string
	indexer   cache.Indexer
	rec       *recorder
	alloc     *allocate.Allocator
	cache     string
	clock     *clocktesting.FakeClock
	unhealthy map[string]bool
}

type envOption func(*config.Config, *allocate.Options)

func newEnv(t testing.TB, opts ...envOption) *env {
	t.Helper()
	srv, err := nvmlmock.New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := nvidia.Discover(srv)
	if err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	e := &env{srv: srv, uuids: srv.UUIDs(), clock: clocktesting.NewFakeClock(now), unhealthy: map[string]bool{}}
	e.indexer = cache.NewIndexer(cache.MetaNamespaceKeyFunc, allocate.Indexers())
	e.rec = &recorder{indexer: e.indexer}
	e.cache = t.TempDir()
	n := 0
	o := allocate.Options{
		Node:            nodeName,
		Lookup:          allocate.IndexerLookup{Indexer: e.indexer},
		Patcher:         e.rec,
		MIG:             nvidia.NewMIG(srv),
		LibvgpuHostPath: "/usr/local/vgpu/libvgpu.so",
		CacheHostDir:    e.cache,
		Clock:           e.clock,
		Healthy:         func(u string) bool { return !e.unhealthy[u] },
		NewID:           func() string { n++; return "region-" + strconv.Itoa(n) },
	}
	for _, opt := range opts {
		opt(cfg, &o)
	}
	e.inv = nvidia.NewInventory(nodeName, gpus, cfg, nvidia.UnitMiB)
	o.Inventory = func() *nvidia.Inventory { return e.inv }
	if e.alloc, err = allocate.New(o); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) add(t testing.TB, pods ...*v1.Pod) {
	for _, p := range pods {
		if err := e.indexer.Add(p); err != nil {
			panic(err) // the indexer only fails on a bad key function
		}
	}
}

// podBuilder builds pods annotated as the scheduler writes them.
type podBuilder struct{ pod *v1.Pod }

func newPod(name string) *podBuilder {
	return &podBuilder{pod: &v1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{}},
		Spec:       v1.PodSpec{NodeName: nodeName},
		Status:     v1.PodStatus{Phase: v1.PodPending},
	}}
}

// container adds a container asking for n vGPUs (n=0: none) with optional
// extra resources ("volcano.sh/vgpu-memory": 4000, ...).
func (b *podBuilder) container(name string, n int64, extra map[string]int64) *podBuilder {
	c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: v1.ResourceList{}}}
	if n > 0 {
		c.Resources.Limits["volcano.sh/vgpu-number"] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	for k, v := range extra {
		c.Resources.Limits[v1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	b.pod.Spec.Containers = append(b.pod.Spec.Containers, c)
	return b
}

// initContainer adds an init container asking for n vGPUs (n=0: none),
// a native sidecar (restartPolicy Always) when sidecar.
func (b *podBuilder) initContainer(name string, sidecar bool, n int64, extra map[string]int64) *podBuilder {
	c := v1.Container{Name: name, Resources: v1.ResourceRequirements{Limits: v1.ResourceList{}}}
	if n > 0 {
		c.Resources.Limits["volcano.sh/vgpu-number"] = *resource.NewQuantity(n, resource.DecimalSI)
	}
	for k, v := range extra {
		c.Resources.Limits[v1.ResourceName(k)] = *resource.NewQuantity(v, resource.DecimalSI)
	}
	if sidecar {
		always := v1.ContainerRestartPolicyAlways
		c.RestartPolicy = &always
	}
	b.pod.Spec.InitContainers = append(b.pod.Spec.InitContainers, c)
	return b
}

func (b *podBuilder) env(name, value string) *podBuilder {
	last := &b.pod.Spec.Containers[len(b.pod.Spec.Containers)-1]
	last.Env = append(last.Env, v1.EnvVar{Name: name, Value: value})
	return b
}

// allocated writes the scheduler's annotations: ids for both vgpu-ids-new and
// devices-to-allocate, bound seconds ago, vgpu-time t.
func (b *podBuilder) allocated(ids string, t int64) *podBuilder {
	a := b.pod.Annotations
	a[vgpuproto.AnnotationIDs] = ids
	a[vgpuproto.AnnotationToAllocate] = ids
	a[vgpuproto.AnnotationNode] = nodeName
	a[vgpuproto.AnnotationTime] = strconv.FormatInt(t, 10)
	a[vgpuproto.AnnotationBindTime] = strconv.FormatInt(now.Add(-10*time.Second).Unix(), 10)
	a[vgpuproto.AnnotationBindPhase] = vgpuproto.BindPhaseAllocating
	return b
}

func (b *podBuilder) annotate(k, v string) *podBuilder {
	b.pod.Annotations[k] = v
	return b
}

func (b *podBuilder) phase(p v1.PodPhase) *podBuilder {
	b.pod.Status.Phase = p
	return b
}

func (b *podBuilder) build() *v1.Pod { return b.pod }

func qty(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }

// cmpProto compares protobuf messages by their exported fields.
func cmpProto() cmp.Option {
	return cmpopts.IgnoreUnexported(pluginapi.ContainerAllocateResponse{}, pluginapi.Mount{}, pluginapi.DeviceSpec{})
}

func nvidiaGeometry(e *env, uuid string) (string, error) {
	card, _ := e.inv.Card(uuid)
	return nvidia.NewMIG(e.srv).Geometry(card, e.inv.NVIDIA.KnownMIGGeometries)
}

func (e *env) allocInventory() func() *nvidia.Inventory {
	return func() *nvidia.Inventory { return e.inv }
}
