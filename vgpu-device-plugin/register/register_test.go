package register_test

import (
	"context"
	"maps"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/internal/notify"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/health"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/register"
)

func inventory(t *testing.T, cfg *config.Config) *nvidia.Inventory {
	t.Helper()
	gpus := []nvidia.GPU{
		{UUID: "GPU-0", Index: 0, Name: "Tesla T4", MemoryMiB: 15360, MIGCapable: false},
		{UUID: "GPU-1", Index: 1, Name: "NVIDIA A100-SXM4-40GB", MemoryMiB: 40960, MIGCapable: true},
	}
	return nvidia.NewInventory("n1", gpus, cfg, nvidia.UnitMiB)
}

func TestEncode(t *testing.T) {
	cfg := config.Default()
	cfg.NVIDIA.DeviceMemoryScaling = 2
	inv := inventory(t, cfg)
	got := register.Encode(inv, func(u string) bool { return u != "GPU-1" })
	want := "GPU-0,10,30720,NVIDIA-Tesla T4,true,hami-core,0:GPU-1,10,81920,NVIDIA-NVIDIA A100-SXM4-40GB,false,hami-core,0:"
	if got != want {
		t.Errorf("Encode =\n%q, want\n%q", got, want)
	}
}

// apiNode plays the API server and the node informer: patches update the
// node (bumping its resourceVersion) and are recorded.
type apiNode struct {
	mu      sync.Mutex
	node    *v1.Node
	patches []map[string]string
	reg     *register.Registrar
}

func (a *apiNode) PatchNodeAnnotations(_ context.Context, _ string, ann map[string]string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.patches = append(a.patches, maps.Clone(ann))
	a.update(func(n *v1.Node) { maps.Copy(n.Annotations, ann) })
	return nil
}

// update changes the node as another writer would; mu must be held.
func (a *apiNode) update(edit func(*v1.Node)) {
	n := a.node.DeepCopy()
	edit(n)
	rv, _ := strconv.Atoi(n.ResourceVersion)
	n.ResourceVersion = strconv.Itoa(rv + 1)
	a.node = n
	go a.reg.ObserveNode(n) // the informer delivers later
}

func (a *apiNode) edit(edit func(*v1.Node)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.update(edit)
}

func (a *apiNode) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.patches)
}

func (a *apiNode) last() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.patches[len(a.patches)-1]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// settle checks that no patch follows within a short while.
func settle(t *testing.T, a *apiNode, want int) {
	t.Helper()
	time.Sleep(50 * time.Millisecond)
	if got := a.count(); got != want {
		t.Fatalf("%d patches, want %d: %v", got, want, a.patches)
	}
}

func TestRegistrarWritesOnlyChangesAndAnswersHandshake(t *testing.T) {
	cfg := config.Default()
	cfg.NodeConfigs = []config.NodeConfig{{Name: "n1", OperatingMode: "mig"}}
	inv := inventory(t, cfg)
	tracker := health.NewTracker()
	var migChanged notify.Signal
	geometry := "group1"
	var geoMu sync.Mutex
	clk := clocktesting.NewFakeClock(time.Date(2026, 5, 1, 8, 0, 0, 0, time.UTC))
	api := &apiNode{node: &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", ResourceVersion: "1", Annotations: map[string]string{}}}}
	reg, err := register.New(register.Options{
		Node: "n1", Inventory: func() *nvidia.Inventory { return inv }, Healthy: tracker.Healthy,
		Geometry: func(c nvidia.Card) (string, error) { geoMu.Lock(); defer geoMu.Unlock(); return geometry, nil },
		Changed: func() <-chan struct{} {
			h, m := tracker.Changed(), migChanged.C()
			out := make(chan struct{})
			go func() {
				select {
				case <-h:
				case <-m:
				}
				close(out)
			}()
			return out
		},
		Patcher: api, Clock: clk,
	})
	if err != nil {
		t.Fatal(err)
	}
	api.reg = reg
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go reg.Run(ctx)
	reg.ObserveNode(api.node)

	waitFor(t, "the first registration", func() bool { return api.count() == 1 })
	want := map[string]string{
		vgpuproto.AnnotationRegister:    "GPU-0,10,15360,NVIDIA-Tesla T4,true,hami-core,0:GPU-1,10,40960,NVIDIA-NVIDIA A100-SXM4-40GB,true,mig,0:",
		vgpuproto.AnnotationMIGGeometry: "GPU-1,group1:",
		vgpuproto.AnnotationHandshake:   "Reported_2026.05.01 08:00:00",
	}
	if diff := cmp.Diff(want, api.last()); diff != "" {
		t.Errorf("first patch (-want +got):\n%s", diff)
	}
	settle(t, api, 1) // the informer's echo of our own patch changes nothing

	tracker.SetUnhealthy("GPU-0", "Xid 79")
	waitFor(t, "the health change", func() bool { return api.count() == 2 })
	if got := api.last()[vgpuproto.AnnotationRegister]; !strings.Contains(got, "GPU-0,10,15360,NVIDIA-Tesla T4,false") {
		t.Errorf("registration after the Xid = %q, want GPU-0 unhealthy", got)
	}
	geoMu.Lock()
	geometry = "group2"
	geoMu.Unlock()
	migChanged.Broadcast()
	waitFor(t, "the geometry change", func() bool { return api.count() == 3 })
	if got := api.last()[vgpuproto.AnnotationMIGGeometry]; got != "GPU-1,group2:" {
		t.Errorf("geometry annotation = %q", got)
	}

	// Volcano v1.10's scheduler asks for a handshake: answered no sooner than
	// 30 s after the previous report.
	clk.Step(10 * time.Second)
	api.edit(func(n *v1.Node) { n.Annotations[vgpuproto.AnnotationHandshake] = "Requesting_2026.05.01 08:00:10" })
	settle(t, api, 3)
	clk.Step(20 * time.Second)
	waitFor(t, "the handshake answer", func() bool { return api.count() == 4 })
	if diff := cmp.Diff(map[string]string{vgpuproto.AnnotationHandshake: "Reported_2026.05.01 08:00:30"}, api.last()); diff != "" {
		t.Errorf("handshake answer (-want +got):\n%s", diff)
	}
	settle(t, api, 4)

	// Someone removes the registration: it is written again.
	api.edit(func(n *v1.Node) { delete(n.Annotations, vgpuproto.AnnotationRegister) })
	waitFor(t, "the rewrite", func() bool { return api.count() == 5 })
	if _, ok := api.last()[vgpuproto.AnnotationRegister]; !ok {
		t.Errorf("rewrite patch %v lacks the registration", api.last())
	}
}
