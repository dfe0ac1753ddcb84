package vgpu

import (
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	vgpuproto "github.com/vgpushare/vshare/protocol/vgpu"
)

// testUnix is the fake clock's time in every test, in Unix seconds.
const testUnix = 1700000000

func newBackend(t testing.TB, mutate ...func(*config.NVIDIAConfig)) *Backend {
	t.Helper()
	cfg := config.Default().NVIDIA
	for _, m := range mutate {
		m(&cfg)
	}
	b, err := New(Options{Config: &cfg, Clock: clocktesting.NewFakePassiveClock(time.Unix(testUnix, 0))})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return b
}

// card is a test card for the volcano register.
type card struct {
	uuid, typ string
	count     int
	mem       int64
	healthy   bool
	mode      string
}

func gpu(uuid string, mem int64) card {
	return card{uuid: uuid, typ: "NVIDIA-Tesla V100-PCIE-32GB", count: 10, mem: mem, healthy: true, mode: vgpuproto.ModeHAMiCore}
}

func (c card) withType(t string) card  { c.typ = t; return c }
func (c card) withCount(n int) card    { c.count = n; return c }
func (c card) unhealthy() card         { c.healthy = false; return c }
func (c card) inMode(mode string) card { c.mode = mode; return c }
func register(cards ...card) string {
	out := make([]vgpuproto.Card, len(cards))
	for i, c := range cards {
		out[i] = vgpuproto.Card{UUID: c.uuid, Count: int32(c.count), MemMiB: c.mem, Type: c.typ, Healthy: c.healthy, Mode: c.mode}
	}
	return vgpuproto.EncodeRegister(out)
}

// vgpuNode builds a node with the volcano register of the cards and extra
// annotation key/value pairs.
func vgpuNode(cards []card, annotations ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{
		vgpuproto.AnnotationRegister:  register(cards...),
		vgpuproto.AnnotationHandshake: "Reported 2026-01-01",
	}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		n.Annotations[annotations[i]] = annotations[i+1]
	}
	return n
}

// fourCards is a node with four 16 GiB cards, GPU-0..GPU-3.
func fourCards(annotations ...string) *v1.Node {
	return vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384), gpu("GPU-2", 16384), gpu("GPU-3", 16384)}, annotations...)
}

// ctr describes one container's vGPU limits; negative values are left out.
type ctr struct {
	n, mem, pct, cores int64
}

func limits(c ctr) v1.ResourceList {
	l := v1.ResourceList{}
	set := func(name string, v int64) {
		if v >= 0 {
			l[v1.ResourceName(name)] = *resource.NewQuantity(v, resource.DecimalSI)
		}
	}
	set(config.DefaultResourceCountName, c.n)
	set(config.DefaultResourceMemoryName, c.mem)
	set(config.DefaultResourceMemoryPercentageName, c.pct)
	set(config.DefaultResourceCoreName, c.cores)
	return l
}

// vpod builds a running pod with one container per ctr and annotation
// key/value pairs.
func vpod(name string, ctrs []ctr, annotations ...string) *v1.Pod {
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Annotations: map[string]string{}}}
	for i, c := range ctrs {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + strconv.Itoa(i),
			Resources: v1.ResourceRequirements{Limits: limits(c)}})
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	p.Status.Phase = v1.PodRunning
	return p
}

// one is a pod with one container asking for n cards of mem MiB and cores.
func one(name string, n, mem, cores int64, annotations ...string) *v1.Pod {
	return vpod(name, []ctr{{n: n, mem: mem, pct: -1, cores: cores}}, annotations...)
}

// placed returns a copy of the pod carrying vgpu-ids-new.
func placed(p *v1.Pod, ids string) *v1.Pod {
	out := p.DeepCopy()
	out.Annotations[vgpuproto.AnnotationIDs] = ids
	return out
}

// devicesOf decodes the node and accounts the pods.
func devicesOf(t testing.TB, b *Backend, node *v1.Node, pods ...*v1.Pod) *Devices {
	t.Helper()
	d, err := b.NewDevices(node)
	if err != nil || d == nil {
		t.Fatalf("NewDevices: %v, %v", d, err)
	}
	for _, p := range pods {
		if err := d.AddResource(p); err != nil {
			t.Fatalf("AddResource(%s): %v", p.Name, err)
		}
	}
	return d.(*Devices)
}

// allocated allocates the pod and returns its vgpu-ids-new.
func allocated(t testing.TB, d *Devices, p *v1.Pod, policy string) string {
	t.Helper()
	r, err := d.Allocate(p, policy)
	if err != nil {
		t.Fatalf("Allocate(%s): %v", p.Name, err)
	}
	return r.Annotations[vgpuproto.AnnotationIDs]
}
