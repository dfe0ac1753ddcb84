package vgpu

import (
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
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
	return testkit.Node("node-a", append([]string{vgpuproto.AnnotationRegister, register(cards...),
		vgpuproto.AnnotationHandshake, "Reported 2026-01-01"}, annotations...)...)
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
	return testkit.Limits(map[v1.ResourceName]int64{
		config.DefaultResourceCountName:            c.n,
		config.DefaultResourceMemoryName:           c.mem,
		config.DefaultResourceMemoryPercentageName: c.pct,
		config.DefaultResourceCoreName:             c.cores,
	})
}

// vpod builds a running pod with one container per ctr and annotation
// key/value pairs.
func vpod(name string, ctrs []ctr, annotations ...string) *v1.Pod {
	l := make([]v1.ResourceList, len(ctrs))
	for i, c := range ctrs {
		l[i] = limits(c)
	}
	return testkit.Pod(name, l, annotations...)
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
	return testkit.NewDevices(t, b, node, pods...).(*Devices)
}

// allocated allocates the pod and returns its vgpu-ids-new.
func allocated(t testing.TB, d *Devices, p *v1.Pod, policy string) string {
	t.Helper()
	return testkit.Allocate(t, d, p, policy).Annotations[vgpuproto.AnnotationIDs]
}

// withInit returns a copy of p with one init container per ctr: a regular
// one ("i<k>") or a native sidecar ("s<k>", restartPolicy Always) as kinds
// says, letter by letter ('i' or 's').
func withInit(p *v1.Pod, kinds string, ctrs ...ctr) *v1.Pod {
	out := p.DeepCopy()
	always := v1.ContainerRestartPolicyAlways
	for k, c := range ctrs {
		ic := v1.Container{Name: "i" + strconv.Itoa(k), Resources: v1.ResourceRequirements{Limits: limits(c)}}
		if kinds[k] == 's' {
			ic.Name, ic.RestartPolicy = "s"+strconv.Itoa(k), &always
		}
		out.Spec.InitContainers = append(out.Spec.InitContainers, ic)
	}
	return out
}

// filterOn, scoreOn and allocateOn are FilterNode, ScoreNode and Allocate
// on a node with host free outside its cards, as the plugin calls them:
// the request prepared once (Prepare), then Fit and AllocatePrepared.
func (d *Devices) filterOn(pod *v1.Pod, policy string, host device.Host) *device.Status {
	p, _ := d.b.Prepare(pod, policy)
	_, st := d.Fit(pod, p, host)
	return st
}

func (d *Devices) scoreOn(pod *v1.Pod, policy string, host device.Host) float64 {
	p, _ := d.b.Prepare(pod, policy)
	sc, _ := d.Fit(pod, p, host)
	return sc
}

func (d *Devices) allocateOn(pod *v1.Pod, policy string, host device.Host) (*device.Reservation, error) {
	p, _ := d.b.Prepare(pod, policy)
	return d.AllocatePrepared(pod, p, host)
}
