package deviceshare

import (
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"volcano.sh/volcano/pkg/scheduler/framework"
	"volcano.sh/volcano/pkg/scheduler/util"

	"github.com/vgpushare/vshare/backends/registry"
	"github.com/vgpushare/vshare/backends/vgpu"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/protocol/nodelock"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

const vgpuArgs = `      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: binpack
      deviceshare.ScheduleWeight: 10`

const vgpuSpreadArgs = `      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: spread
      deviceshare.ScheduleWeight: 10`

// vcard is one card of a vGPU test node.
type vcard struct {
	uuid, typ string
	mem       int64
}

// vgpuNode builds a node whose vGPU agent registered the cards (shared by
// 10 pods each) and advertises volcano.sh/vgpu-number accordingly.
//
// The handshake says "Requesting" with a time in the future: Volcano v1.10
// builds its own vGPU devices for every NodeInfo, whatever plugin runs, and
// on any other handshake value patches the node through a package-level
// client, which is nil without a kubeconfig. Our backend ignores it.
func vgpuNode(name string, cards ...vcard) *v1.Node {
	var reg strings.Builder
	for _, c := range cards {
		typ := c.typ
		if typ == "" {
			typ = "NVIDIA-Tesla V100-PCIE-32GB"
		}
		reg.WriteString(c.uuid + ",10," + strconv.FormatInt(c.mem, 10) + "," + typ + ",true,hami-core:")
	}
	n := util.BuildNode(name, v1.ResourceList{
		v1.ResourceCPU:           resource.MustParse("64"),
		v1.ResourceMemory:        resource.MustParse("256Gi"),
		v1.ResourcePods:          resource.MustParse("110"),
		"volcano.sh/vgpu-number": *resource.NewQuantity(int64(10*len(cards)), resource.DecimalSI),
	}, nil)
	n.Annotations = map[string]string{vgpuproto.AnnotationRegister: reg.String(), vgpuproto.AnnotationHandshake: "Requesting_2099.01.01 00:00:00"}
	return n
}

// vgpuPod asks for n cards of mem MiB and cores percent each; extra
// arguments are annotation key/value pairs.
func vgpuPod(name, group string, n, mem, cores int64, annotations ...string) *v1.Pod {
	res := v1.ResourceList{"volcano.sh/vgpu-number": *resource.NewQuantity(n, resource.DecimalSI)}
	if mem > 0 {
		res["volcano.sh/vgpu-memory"] = *resource.NewQuantity(mem, resource.DecimalSI)
	}
	if cores >= 0 {
		res["volcano.sh/vgpu-cores"] = *resource.NewQuantity(cores, resource.DecimalSI)
	}
	p := devicePod(name, group, res)
	for i := 0; i+1 < len(annotations); i += 2 {
		p.Annotations[annotations[i]] = annotations[i+1]
	}
	return p
}

// vgpuCards returns, per bound pod, its node and cards ("n1/GPU-0,GPU-1").
func vgpuCards(binds map[string]boundPod) map[string]string {
	out := map[string]string{}
	for k, b := range binds {
		var uuids []string
		for _, e := range strings.Split(b.Annotations[vgpuproto.AnnotationIDs], ":") {
			if e != "" {
				uuids = append(uuids, strings.Split(strings.TrimLeft(e, ";"), ",")[0])
			}
		}
		out[strings.TrimPrefix(k, testNamespace+"/")] = b.Node + "/" + strings.Join(uuids, ",")
	}
	return out
}

// perCard counts bound pods per node/card.
func perCard(binds map[string]boundPod) map[string]int {
	out := map[string]int{}
	for _, c := range vgpuCards(binds) {
		node, cards, _ := strings.Cut(c, "/")
		for _, u := range strings.Split(cards, ",") {
			out[node+"/"+u]++
		}
	}
	return out
}

// sessionFitMessages runs a session and returns the fit errors of the pods.
func sessionFitMessages(c *cluster, pods ...*v1.Pod) string {
	var msgs []string
	c.session(func(ssn *framework.Session) {
		for _, p := range pods {
			if m := fitMessage(ssn, p); m != "" {
				msgs = append(msgs, m)
			}
		}
	})
	return strings.Join(msgs, " | ")
}

func TestVGPUGangBinpackWritesTheProtocol(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 8000}, vcard{"GPU-1", "", 8000})}, nil)
	var pods []*v1.Pod
	for i := 0; i < 4; i++ {
		pods = append(pods, vgpuPod("w"+strconv.Itoa(i), "pg1", 1, 4000, 25))
	}
	c.addJob(podGroup("pg1", 4), pods...)
	c.session(nil)
	binds := c.waitBinds(4)
	if diff := cmp.Diff(map[string]int{"n1/GPU-0": 2, "n1/GPU-1": 2}, perCard(binds)); diff != "" {
		t.Errorf("pods per card (-want +got):\n%s", diff)
	}
	for key, b := range binds {
		a := b.Annotations
		ids := a[vgpuproto.AnnotationIDs]
		if !strings.HasSuffix(ids, ",NVIDIA,4000,25:") || a[vgpuproto.AnnotationToAllocate] != ids {
			t.Errorf("%s: vgpu-ids-new %q, devices-to-allocate %q", key, ids, a[vgpuproto.AnnotationToAllocate])
		}
		if a[vgpuproto.AnnotationNode] != "n1" || a[vgpuproto.AnnotationBindPhase] != "allocating" ||
			a[vgpuproto.AnnotationTime] != strconv.FormatInt(testTime.Unix(), 10) || a[vgpuproto.AnnotationBindTime] == "" {
			t.Errorf("%s: protocol annotations %v", key, a)
		}
	}
}

func TestVGPUSpreadTakesIdleCards(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuSpreadArgs), []*v1.Node{
		vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000}, vcard{"GPU-2", "", 16000})}, nil)
	c.addJob(podGroup("pg1", 3), vgpuPod("a", "pg1", 1, 1000, 10), vgpuPod("b", "pg1", 1, 1000, 10), vgpuPod("c", "pg1", 1, 1000, 10))
	c.session(nil)
	if diff := cmp.Diff(map[string]int{"n1/GPU-0": 1, "n1/GPU-1": 1, "n1/GPU-2": 1}, perCard(c.waitBinds(3))); diff != "" {
		t.Errorf("pods per card under spread (-want +got):\n%s", diff)
	}
}

func TestVGPUBinpackAcrossNodesPrefersTheFullerNode(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{
		vgpuNode("n1", vcard{"GPU-a", "", 16000}), vgpuNode("n2", vcard{"GPU-b", "", 16000})}, nil)
	first := vgpuPod("first", "pg1", 1, 8000, 10)
	c.addJob(podGroup("pg1", 1), first)
	c.session(nil)
	node := c.waitBinds(1)[testNamespace+"/first"].Node
	c.confirmBinds(first)
	c.addJob(podGroup("pg2", 1), vgpuPod("second", "pg2", 1, 4000, 10))
	c.session(nil)
	if got := c.waitBinds(1)[testNamespace+"/second"].Node; got != node {
		t.Errorf("binpack put the second pod on %s, want the fuller node %s", got, node)
	}
}

func TestVGPUExclusiveCards(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 8000}, vcard{"GPU-1", "", 8000})}, nil)
	c.addJob(podGroup("pg1", 2), vgpuPod("x0", "pg1", 1, 1000, 100), vgpuPod("x1", "pg1", 1, 1000, 100))
	c.session(nil)
	if diff := cmp.Diff(map[string]int{"n1/GPU-0": 1, "n1/GPU-1": 1}, perCard(c.waitBinds(2))); diff != "" {
		t.Errorf("exclusive pods per card (-want +got):\n%s", diff)
	}
	late := vgpuPod("late", "pg2", 1, 1000, 0)
	c.addJob(podGroup("pg2", 1), late)
	msg := sessionFitMessages(c, late)
	c.expectNoBind()
	if !strings.Contains(msg, vgpu.ReasonCardCoresFull) {
		t.Errorf("fit error %q does not say the cards are held exclusively", msg)
	}
}

func TestVGPUSelectors(t *testing.T) {
	nodes := []*v1.Node{
		vgpuNode("n1", vcard{"GPU-v100", "NVIDIA-Tesla V100", 16000}),
		vgpuNode("n2", vcard{"GPU-t4", "NVIDIA-Tesla T4", 16000}),
	}
	c := newCluster(t, schedulerConf(vgpuArgs), nodes, nil)
	c.addJob(podGroup("pg1", 1), vgpuPod("t4", "pg1", 1, 1000, 10, vgpuproto.AnnotationUseType, "t4"))
	c.addJob(podGroup("pg2", 1), vgpuPod("not-v100", "pg2", 1, 1000, 10, vgpuproto.AnnotationNoUseType, "V100"))
	c.addJob(podGroup("pg3", 1), vgpuPod("by-uuid", "pg3", 1, 1000, 10, vgpuproto.AnnotationUseUUID, "GPU-v100"))
	c.session(nil)
	want := map[string]string{"t4": "n2/GPU-t4", "not-v100": "n2/GPU-t4", "by-uuid": "n1/GPU-v100"}
	if diff := cmp.Diff(want, vgpuCards(c.waitBinds(3))); diff != "" {
		t.Errorf("placements (-want +got):\n%s", diff)
	}
	none := vgpuPod("none", "pg4", 1, 1000, 10, vgpuproto.AnnotationUseType, "T4", vgpuproto.AnnotationNoUseUUID, "GPU-t4")
	c.addJob(podGroup("pg4", 1), none)
	msg := sessionFitMessages(c, none)
	c.expectNoBind()
	for _, want := range []string{vgpu.ReasonTypeMismatch, vgpu.ReasonUUIDExcluded} {
		if !strings.Contains(msg, want) {
			t.Errorf("fit error %q does not contain %q", msg, want)
		}
	}
}

func TestVGPUPodGroupSpread(t *testing.T) {
	spread := []string{vgpuproto.AnnotationPodGroupPolicy, vgpuproto.PodGroupPolicySpread}
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
	c.addJob(podGroup("pg1", 2), vgpuPod("a", "pg1", 1, 1000, 10, spread...), vgpuPod("b", "pg1", 1, 1000, 10, spread...))
	c.session(nil)
	if diff := cmp.Diff(map[string]int{"n1/GPU-0": 1, "n1/GPU-1": 1}, perCard(c.waitBinds(2))); diff != "" {
		t.Errorf("gang members per card (-want +got):\n%s", diff)
	}
	gang := []*v1.Pod{vgpuPod("x", "pg2", 1, 1000, 10, spread...), vgpuPod("y", "pg2", 1, 1000, 10, spread...),
		vgpuPod("z", "pg2", 1, 1000, 10, spread...)}
	c.addJob(podGroup("pg2", 3), gang...)
	msg := sessionFitMessages(c, gang...)
	c.expectNoBind()
	if !strings.Contains(msg, vgpu.ReasonGangOnCard) {
		t.Errorf("fit errors %q do not name the PodGroup spread", msg)
	}
}

func TestVGPURefusesImpossibleRequests(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
	cores := vgpuPod("cores", "pg1", 1, 1000, 150)
	many := vgpuPod("many", "pg2", 3, 1000, 10)
	big := vgpuPod("big", "pg3", 1, 20000, 10)
	c.addJob(podGroup("pg1", 1), cores)
	c.addJob(podGroup("pg2", 1), many)
	c.addJob(podGroup("pg3", 1), big)
	var msgs []string
	c.session(func(ssn *framework.Session) {
		for _, p := range []*v1.Pod{cores, many, big} {
			msgs = append(msgs, fitMessage(ssn, p))
		}
	})
	c.expectNoBind()
	for i, want := range []string{"volcano.sh/vgpu-cores=150", vgpu.ReasonTooFewCards, vgpu.ReasonCardTooSmall} {
		if !strings.Contains(msgs[i], want) {
			t.Errorf("fit error %q does not contain %q", msgs[i], want)
		}
	}
}

func TestVGPUInFlightAllocationsAreNotHandedOutTwice(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 8000})}, nil)
	c.addJob(podGroup("pg1", 1), vgpuPod("a", "pg1", 1, 6000, 10))
	c.session(nil)
	c.waitBinds(1)
	c.addJob(podGroup("pg2", 1), vgpuPod("b", "pg2", 1, 6000, 10))
	c.session(nil)
	c.expectNoBind()
	c.addJob(podGroup("pg3", 1), vgpuPod("c", "pg3", 1, 2000, 10))
	c.session(nil)
	if got := vgpuCards(c.waitBinds(1))["c"]; got != "n1/GPU-0" {
		t.Errorf("c bound to %q, want n1/GPU-0", got)
	}
}

func TestVGPUDiscardedGangReturnsCards(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 8000}, vcard{"GPU-1", "", 8000})}, nil)
	high := int32(1000)
	big := podGroup("big", 3)
	var bigPods []*v1.Pod
	for _, n := range []string{"b0", "b1", "b2"} {
		p := vgpuPod(n, "big", 1, 5000, 10)
		p.Spec.Priority = &high
		bigPods = append(bigPods, p)
	}
	c.addJob(big, bigPods...)
	c.addJob(podGroup("small", 2), vgpuPod("s0", "small", 1, 8000, 10), vgpuPod("s1", "small", 1, 8000, 10))
	c.session(nil)
	var got []string
	for k := range c.waitBinds(2) {
		got = append(got, k)
	}
	sort.Strings(got)
	if diff := cmp.Diff([]string{testNamespace + "/s0", testNamespace + "/s1"}, got); diff != "" {
		t.Errorf("bound pods (-want +got):\n%s", diff)
	}
	c.expectNoBind()
}

func TestVGPUNodeLock(t *testing.T) {
	args := vgpuArgs + `
      deviceshare.NodeLockEnable: true`
	c := newCluster(t, schedulerConf(args), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000})}, nil)
	a, b := vgpuPod("a", "pg1", 1, 1000, 10), vgpuPod("b", "pg2", 1, 1000, 10)
	c.addJob(podGroup("pg1", 1), a)
	c.addJob(podGroup("pg2", 1), b)
	msg := sessionFitMessages(c, a, b)
	binds := c.waitBinds(1)
	c.expectNoBind()
	if !strings.Contains(msg, ReasonNodeLocked) {
		t.Errorf("fit error %q does not say the node is locked", msg)
	}
	// The pod says which lock its bind took, for the agent to release.
	for _, bd := range binds {
		if got := bd.Annotations[nodelock.AnnotationTaken]; got != vgpu.Name {
			t.Errorf("%s = %q, want %q", nodelock.AnnotationTaken, got, vgpu.Name)
		}
	}
}

// A lock left by an allocation nobody served (its pod deleted before the
// agent's Allocate, or the agent dead) blocks the node only until
// deviceshare.NodeLockExpiry; at the default expiry the same lock still
// holds.
func TestVGPUNodeLockExpiry(t *testing.T) {
	tests := []struct {
		name, args string
		wantBind   bool
	}{
		{name: "default expiry: a 40s-old lock holds", wantBind: false},
		{name: "30s expiry: a 40s-old lock is taken over", args: `
      deviceshare.NodeLockExpiry: 30s`, wantBind: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			node := vgpuNode("n1", vcard{"GPU-0", "", 16000})
			node.Annotations[vgpu.Name] = nodelock.Format(testTime.Add(-40*time.Second), types.NamespacedName{Namespace: testNamespace, Name: "gone"})
			c := newCluster(t, schedulerConf(vgpuArgs+`
      deviceshare.NodeLockEnable: true`+tc.args), []*v1.Node{node}, nil)
			a := vgpuPod("a", "pg1", 1, 1000, 10)
			c.addJob(podGroup("pg1", 1), a)
			msg := sessionFitMessages(c, a)
			if !tc.wantBind {
				c.expectNoBind()
				if !strings.Contains(msg, ReasonNodeLocked) {
					t.Errorf("fit error %q does not say the node is locked", msg)
				}
				return
			}
			if b := c.waitBinds(1); b[testNamespace+"/a"].Node != "n1" {
				t.Errorf("binds = %v, want a on n1", b)
			}
		})
	}
}

func TestRegistryBuildsVGPU(t *testing.T) {
	cfg := config.Default()
	cfg.NVIDIA.ResourceMemoryName = "example.com/gpumem"
	backends, err := registry.Build(pluginargs.Args{VGPUEnable: true}, cfg, nil)
	if err != nil || len(backends) != 1 || backends[0].Name() != vgpu.Name {
		t.Fatalf("registry.Build = %v, %v; want the vGPU backend", backends, err)
	}
	if _, mem, _, _ := backends[0].(*vgpu.Backend).Resources(); mem != "example.com/gpumem" {
		t.Errorf("memory resource = %s, want the configured name", mem)
	}
	if diff := cmp.Diff([]string{"hamivgpu"}, appendLocks(nil, true, backends[0], &device.Reservation{})); diff != "" {
		t.Errorf("node lock names (-want +got):\n%s", diff)
	}
	if _, err := registry.Build(pluginargs.Args{VGPUEnable: true}, nil, nil); err != nil {
		t.Errorf("registry.Build without a configuration: %v", err)
	}
	var _ device.NodeLocker = backends[0].(*vgpu.Backend)
}

// Under the fragment policy the plugin shows the backend the pending pods
// (the workload it learns) and each node's idle CPU and memory; a gang is
// placed through the real allocate action, one pod per card of 8000 MiB
// left where a half-card pod still fits, and the backend learned the
// request.
func TestVGPUFragmentPolicyPlacesAndLearns(t *testing.T) {
	c := newCluster(t, schedulerConf(`      deviceshare.VGPUEnable: true
      deviceshare.SchedulePolicy: fragment
      deviceshare.ScheduleWeight: 10`), []*v1.Node{
		vgpuNode("n1", vcard{"GPU-0", "", 16000}, vcard{"GPU-1", "", 16000})}, nil)
	c.addJob(podGroup("pg1", 2), vgpuPod("a", "pg1", 1, 8000, 50), vgpuPod("b", "pg1", 1, 8000, 50))
	// A gang that never fits (three cards per pod on a two-card node) is
	// still part of the workload the backend learns: with it, the 16
	// requests it waits for before publishing a mix are there.
	var waiting []*v1.Pod
	for i := range 16 {
		waiting = append(waiting, vgpuPod("w"+strconv.Itoa(i), "pg2", 3, 4000, 10))
	}
	c.addJob(podGroup("pg2", 16), waiting...)
	c.session(nil)
	got := perCard(c.waitBinds(2))
	total := 0
	for card, n := range got {
		if n > 2 {
			t.Errorf("card %s holds %d half-card pods", card, n)
		}
		total += n
	}
	if total != 2 {
		t.Errorf("pods per card %v, want both pods placed", got)
	}
	var learned uint64
	for _, b := range c.st.backends {
		if v, ok := b.(*vgpu.Backend); ok {
			learned = v.WorkloadGeneration()
		}
	}
	if learned == 0 {
		t.Error("the vGPU backend never published a learned workload: the plugin did not show it the pending pods")
	}
}

// A request far beyond the queue's share is skipped by proportion before
// any predicate runs; its fit error must still say what is wrong with it.
func TestVGPUAbsurdRequestIsExplained(t *testing.T) {
	c := newCluster(t, schedulerConf(vgpuArgs), []*v1.Node{vgpuNode("n1", vcard{"GPU-0", "", 16000})}, nil)
	absurd := vgpuPod("absurd", "pg1", 1000000, 1000, 10)
	c.addJob(podGroup("pg1", 1), absurd)
	var msg string
	c.session(func(ssn *framework.Session) { msg = fitMessage(ssn, absurd) })
	c.expectNoBind()
	if want := ReasonInvalidRequest; !strings.Contains(msg, want) || !strings.Contains(msg, "volcano.sh/vgpu-number=1M") {
		t.Errorf("fit error %q does not say the request volcano.sh/vgpu-number=1M is invalid", msg)
	}
}
