package deviceshare

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"volcano.sh/volcano/pkg/scheduler/util"

	"github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

const ascendArgs = `      deviceshare.AscendHAMiVNPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10`

// The built-in 310P entry: commonWord Ascend310P, 21527 MiB allocatable,
// templates vir01 (3072 MiB), vir02 (6144 MiB) and vir04 (12288 MiB).
const chip310P = "Ascend310P"

var keys310P = ascendproto.KeysFor(chip310P)

// npuNode builds a node whose HAMi Ascend agent registered 310P cards (7
// vNPUs each) and advertises the count resource; when advertised is true
// it also carries the memory and core totals the plugin's advertiser
// writes.
func npuNode(name string, advertised bool, ids ...string) *v1.Node {
	type dev struct {
		ID     string `json:"id"`
		Count  int    `json:"count"`
		Devmem int    `json:"devmem"`
		Type   string `json:"type"`
		Health bool   `json:"health"`
	}
	var devs []dev
	for _, id := range ids {
		devs = append(devs, dev{ID: id, Count: 7, Devmem: 21527, Type: chip310P, Health: true})
	}
	reg, err := json.Marshal(devs)
	if err != nil {
		panic(err)
	}
	res := v1.ResourceList{
		v1.ResourceCPU:           resource.MustParse("64"),
		v1.ResourceMemory:        resource.MustParse("256Gi"),
		v1.ResourcePods:          resource.MustParse("110"),
		"huawei.com/" + chip310P: *resource.NewQuantity(int64(7*len(ids)), resource.DecimalSI),
	}
	if advertised {
		res["huawei.com/"+chip310P+"-memory"] = *resource.NewQuantity(int64(21527*len(ids)), resource.DecimalSI)
		res["huawei.com/"+chip310P+"-core"] = *resource.NewQuantity(int64(100*len(ids)), resource.DecimalSI)
	}
	n := util.BuildNode(name, res, nil)
	n.Annotations = map[string]string{keys310P.Register: string(reg)}
	return n
}

// npuPod asks for one 310P vNPU of mem MiB (0: the whole card); extra
// arguments are annotation key/value pairs.
func npuPod(name, group string, mem int64, annotations ...string) *v1.Pod {
	res := v1.ResourceList{"huawei.com/" + chip310P: *resource.NewQuantity(1, resource.DecimalSI)}
	if mem > 0 {
		res["huawei.com/"+chip310P+"-memory"] = *resource.NewQuantity(mem, resource.DecimalSI)
	}
	p := devicePod(name, group, res)
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	return p
}

// npuCards returns, per bound pod, "node/card:memMiB" from the allocation.
func npuCards(binds map[string]boundPod) map[string]string {
	out := map[string]string{}
	for k, b := range binds {
		f := strings.Split(strings.TrimSuffix(b.Annotations[keys310P.Allocated], ":;"), ",")
		if len(f) != 4 {
			out[strings.TrimPrefix(k, testNamespace+"/")] = "malformed " + b.Annotations[keys310P.Allocated]
			continue
		}
		out[strings.TrimPrefix(k, testNamespace+"/")] = b.Node + "/" + f[0] + ":" + f[2]
	}
	return out
}

func TestAscendGangSharesAChipByTemplate(t *testing.T) {
	c := newCluster(t, schedulerConf(ascendArgs), []*v1.Node{npuNode("n1", true, "NPU-0", "NPU-1")}, nil)
	c.addJob(podGroup("pg1", 3), npuPod("a", "pg1", 3000), npuPod("b", "pg1", 3072), npuPod("c", "pg1", 1000))
	c.session(nil)
	binds := c.waitBinds(3)
	want := map[string]string{"a": "n1/NPU-0:3072", "b": "n1/NPU-0:3072", "c": "n1/NPU-0:3072"}
	if diff := cmp.Diff(want, npuCards(binds)); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	now := strconv.FormatInt(testTime.Unix(), 10)
	for key, b := range binds {
		a := b.Annotations
		if a[keys310P.ToAllocate] != a[keys310P.Allocated] || a[keys310P.RuntimeInfo] != `[{"UUID":"NPU-0","temp":"vir01"}]` ||
			a[ascendproto.AnnotationAssignedNode] != "n1" || a[ascendproto.AnnotationBindPhase] != ascendproto.BindPhaseAllocating ||
			a[ascendproto.AnnotationAssignedTime] != now || a[ascendproto.AnnotationBindTime] != now {
			t.Errorf("%s: protocol annotations %v", key, a)
		}
	}
}

func TestAscendMemoryRoundsUpToATemplate(t *testing.T) {
	c := newCluster(t, schedulerConf(ascendArgs), []*v1.Node{npuNode("n1", true, "NPU-0")}, nil)
	// 7000 MiB rounds up to vir04 (12288 MiB, 4 AI cores, 4 AI CPUs); a
	// second vir04 would need 8 of the chip's 7 AI CPUs (and more memory
	// than the card has), so it stays pending.
	first, second := npuPod("first", "pg1", 7000), npuPod("second", "pg2", 7000)
	c.addJob(podGroup("pg1", 1), first)
	c.session(nil)
	binds := c.waitBinds(1)
	if got := npuCards(binds)["first"]; got != "n1/NPU-0:12288" {
		t.Errorf("first = %q, want n1/NPU-0:12288 (vir04)", got)
	}
	if got := binds[testNamespace+"/first"].Annotations[keys310P.RuntimeInfo]; got != `[{"UUID":"NPU-0","temp":"vir04"}]` {
		t.Errorf("runtime info %q, want vir04", got)
	}
	c.addJob(podGroup("pg2", 1), second)
	msg := sessionFitMessages(c, second)
	c.expectNoBind()
	if !strings.Contains(msg, ascend.ReasonSlicing) {
		t.Errorf("fit error %q does not say the template does not fit next to the first", msg)
	}
}

func TestAscendRefusesRequestsThatFitNoTemplate(t *testing.T) {
	// Two cards, so that Volcano's node-level resource fit (43054 MiB) lets
	// the pod reach the plugin, which says why no card can take it.
	c := newCluster(t, schedulerConf(ascendArgs), []*v1.Node{npuNode("n1", true, "NPU-0", "NPU-1")}, nil)
	huge := npuPod("huge", "pg1", 30000)
	c.addJob(podGroup("pg1", 1), huge)
	msg := sessionFitMessages(c, huge)
	c.expectNoBind()
	if !strings.Contains(msg, "fits no "+chip310P+" template") {
		t.Errorf("fit error %q does not say the request fits no template", msg)
	}
}

func TestAscendSelectors(t *testing.T) {
	c := newCluster(t, schedulerConf(ascendArgs), []*v1.Node{npuNode("n1", true, "NPU-a"), npuNode("n2", true, "NPU-b")}, nil)
	c.addJob(podGroup("pg1", 1), npuPod("use-b", "pg1", 3000, keys310P.UseUUID, "NPU-b"))
	c.addJob(podGroup("pg2", 1), npuPod("not-a", "pg2", 3000, keys310P.NoUseUUID, "NPU-a"))
	c.session(nil)
	want := map[string]string{"use-b": "n2/NPU-b:3072", "not-a": "n2/NPU-b:3072"}
	if diff := cmp.Diff(want, npuCards(c.waitBinds(2))); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	none := npuPod("none", "pg3", 3000, keys310P.UseUUID, "NPU-a", keys310P.NoUseUUID, "NPU-a")
	c.addJob(podGroup("pg3", 1), none)
	msg := sessionFitMessages(c, none)
	c.expectNoBind()
	if !strings.Contains(msg, ascend.ReasonUUIDExcluded) {
		t.Errorf("fit error %q does not name the UUID selectors", msg)
	}
}

// TestAscendUnadvertisedMemoryPassesVolcanoFit proves that the memory
// resource, which no Ascend node advertises, does not keep pods pending:
// the plugin advertises the cards' totals in the node's status, then
// Volcano's own fit passes and the pod binds with its vNPU.
func TestAscendUnadvertisedMemoryPassesVolcanoFit(t *testing.T) {
	c := newCluster(t, schedulerConf(ascendArgs), nil, nil)
	t.Cleanup(c.st.Close)
	node := npuNode("n1", false, "NPU-0")
	if _, err := c.cache.Client().CoreV1().Nodes().Create(context.Background(), node, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitForNode("n1", func(n *v1.Node) bool { return n != nil })

	pod := npuPod("w", "pg1", 5000)
	c.addJob(podGroup("pg1", 1), pod)
	c.session(nil)
	c.waitForNode("n1", func(n *v1.Node) bool {
		q, ok := n.Status.Allocatable["huawei.com/"+chip310P+"-memory"]
		return ok && q.Value() == 21527
	})
	c.session(nil)
	if got := npuCards(c.waitBinds(1))["w"]; got != "n1/NPU-0:6144" {
		t.Errorf("w = %q, want n1/NPU-0:6144 (vir02)", got)
	}
}
