package ascend

import (
	"encoding/json"
	"testing"
	"time"

	v1 "k8s.io/api/core/v1"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/ascendproto"
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
	return testkit.Node(name, append([]string{ascendproto.KeysFor(commonWord).Register, string(raw)}, annotations...)...)
}

// ctr is one container's request; negative values leave the resource out.
type ctr struct{ n, mem, cores int64 }

// npuPod asks for the chip type commonWord; annotations are key, value pairs.
func npuPod(name, commonWord string, ctrs []ctr, annotations ...string) *v1.Pod {
	res := v1.ResourceName("huawei.com/" + commonWord)
	l := make([]v1.ResourceList, len(ctrs))
	for i, c := range ctrs {
		l[i] = testkit.Limits(map[v1.ResourceName]int64{res: c.n, res + "-memory": c.mem, res + "-core": c.cores})
	}
	return testkit.Pod(name, l, annotations...)
}

func devicesOf(t testing.TB, b *Backend, node *v1.Node) *Devices {
	t.Helper()
	return testkit.NewDevices(t, b, node).(*Devices)
}
