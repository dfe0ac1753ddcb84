package ascend

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deviceshare/api"
	ascendproto "github.com/vgpushare/vshare/protocol/ascend"
)

// testTime is the fixed clock of every test backend.
var testTime = time.Unix(1700000000, 0)

// chipConfig returns a defaulted vnpus entry of the built-in catalogue.
func chipConfig(t testing.TB, commonWord string) config.VNPUConfig {
	t.Helper()
	c, ok := config.Default().VNPUs.Chip(commonWord)
	if !ok {
		t.Fatalf("no built-in vnpus entry %s", commonWord)
	}
	return c
}

func newTestBackend(t testing.TB, commonWord string, hamiCore bool) *Backend {
	t.Helper()
	b, err := New(Options{Chip: chipConfig(t, commonWord), HAMiCore: hamiCore, Clock: clocktesting.NewFakeClock(testTime)})
	if err != nil {
		t.Fatalf("New(%s): %v", commonWord, err)
	}
	return b
}

// card is a builder for one registered device.
type card struct {
	ID         string         `json:"id"`
	Count      int64          `json:"count,omitempty"`
	Devmem     int64          `json:"devmem,omitempty"`
	Devcore    int64          `json:"devcore,omitempty"`
	Type       string         `json:"type,omitempty"`
	Health     bool           `json:"health,omitempty"`
	CustomInfo map[string]any `json:"custominfo,omitempty"`
}

func npu(id string, mem int64) card {
	return card{ID: id, Count: 7, Devmem: mem, Devcore: 20, Type: "Ascend910B3", Health: true}
}

func (c card) unhealthy() card        { c.Health = false; return c }
func (c card) withCount(n int64) card { c.Count = n; return c }
func (c card) withType(t string) card { c.Type = t; return c }
func (c card) inNetwork(id int) card {
	c.CustomInfo = map[string]any{"NetworkID": id}
	return c
}

// ascendNode registers cards under the chip type commonWord; annotations
// are extra key, value pairs.
func ascendNode(name, commonWord string, cards []card, annotations ...string) *v1.Node {
	raw, err := json.Marshal(cards)
	if err != nil {
		panic(err)
	}
	a := map[string]string{ascendproto.KeysFor(commonWord).Register: string(raw)}
	for i := 0; i+1 < len(annotations); i += 2 {
		a[annotations[i]] = annotations[i+1]
	}
	return &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: a}}
}

// ctr is one container's request; negative values leave the resource out.
type ctr struct{ n, mem, cores int64 }

// npuPod asks for the chip type commonWord; annotations are key, value pairs.
func npuPod(name, commonWord string, ctrs []ctr, annotations ...string) *v1.Pod {
	res := "huawei.com/" + commonWord
	p := &v1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", UID: types.UID("uid-" + name),
		Annotations: map[string]string{}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	for i, c := range ctrs {
		l := v1.ResourceList{}
		if c.n >= 0 {
			l[v1.ResourceName(res)] = *resource.NewQuantity(c.n, resource.DecimalSI)
		}
		if c.mem >= 0 {
			l[v1.ResourceName(res+"-memory")] = *resource.NewQuantity(c.mem, resource.DecimalSI)
		}
		if c.cores >= 0 {
			l[v1.ResourceName(res+"-core")] = *resource.NewQuantity(c.cores, resource.DecimalSI)
		}
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "c" + strconv.Itoa(i),
			Resources: v1.ResourceRequirements{Limits: l}})
	}
	return p
}

func devicesOf(t testing.TB, b *Backend, node *v1.Node) *Devices {
	t.Helper()
	d, err := b.NewDevices(node)
	if err != nil {
		t.Fatalf("NewDevices: %v", err)
	}
	if d == nil {
		t.Fatal("NewDevices returned no devices")
	}
	return d.(*Devices)
}

func mustAllocate(t testing.TB, d api.Devices, pod *v1.Pod, policy string) *api.Reservation {
	t.Helper()
	r, err := d.Allocate(pod, policy)
	if err != nil {
		t.Fatalf("Allocate(%s): %v", pod.Name, err)
	}
	return r
}
