package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	clocktesting "k8s.io/utils/clock/testing"

	ascendbackend "github.com/vgpushare/vshare/backends/ascend"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/nodeagent/kube"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// TestRegistrationDecodes checks that what the agent registers is what
// backends/ascend decodes: the simulated chips, their memory, cores,
// health, split count, NetworkID and the node's mode.
func TestRegistrationDecodes(t *testing.T) {
	tests := []struct {
		name     string
		spec     Spec
		want     []device.CardUsage
		status   []string // substrings of GetStatus
		noStatus []string
	}{{
		name: "910B3 template, HAMi's network groups",
		spec: Spec{Entry: entryOf(t, "Ascend910B3"), Count: 6, Unhealthy: []int{2}},
		want: []device.CardUsage{
			{ID: "Ascend910B3-n1-0", Index: 0, Type: "Ascend910B3", Healthy: true, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
			{ID: "Ascend910B3-n1-1", Index: 1, Type: "Ascend910B3", Healthy: true, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
			{ID: "Ascend910B3-n1-2", Index: 2, Type: "Ascend910B3", Healthy: false, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
			{ID: "Ascend910B3-n1-3", Index: 3, Type: "Ascend910B3", Healthy: true, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
			{ID: "Ascend910B3-n1-4", Index: 4, Type: "Ascend910B3", Healthy: true, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
			{ID: "Ascend910B3-n1-5", Index: 5, Type: "Ascend910B3", Healthy: true, MemoryTotalMiB: 65536, CoresTotal: 20, MaxPods: 4},
		},
		status: []string{"template;", "Ascend910B3-n1-3 Ascend910B3: 0/65536 MiB, cores 0/20, AI CPUs 0/7, vNPUs 0/4, network 0",
			"Ascend910B3-n1-4 Ascend910B3: 0/65536 MiB, cores 0/20, AI CPUs 0/7, vNPUs 0/4, network 1", "n1-2 Ascend910B3: 0/65536 MiB, cores 0/20, AI CPUs 0/7, vNPUs 0/4, unhealthy"},
	}, {
		name: "310P hami-core, flags override memory and split count",
		spec: Spec{Entry: entryOf(t, "Ascend310P"), Count: 2, HAMiCore: true, MemoryMiB: 21527, SplitCount: 10, NUMA: []int{0, 1}},
		want: []device.CardUsage{
			{ID: "Ascend310P-n1-0", Index: 0, Type: "Ascend310P", Healthy: true, MemoryTotalMiB: 21527, CoresTotal: 100, MaxPods: 10},
			{ID: "Ascend310P-n1-1", Index: 1, Type: "Ascend310P", Healthy: true, MemoryTotalMiB: 21527, CoresTotal: 100, MaxPods: 10},
		},
		status:   []string{"hami-core;"},
		noStatus: []string{"network"},
	}, {
		name: "910B4 with explicit network IDs",
		spec: Spec{Entry: entryOf(t, "Ascend910B4"), Count: 2, NetworkIDs: []int64{7}},
		want: []device.CardUsage{
			{ID: "Ascend910B4-n1-0", Index: 0, Type: "Ascend910B4", Healthy: true, MemoryTotalMiB: 32768, CoresTotal: 20, MaxPods: 4},
			{ID: "Ascend910B4-n1-1", Index: 1, Type: "Ascend910B4", Healthy: true, MemoryTotalMiB: 32768, CoresTotal: 20, MaxPods: 4},
		},
		status: []string{"n1-0 Ascend910B4: 0/32768 MiB, cores 0/20, AI CPUs 0/7, vNPUs 0/4, network 7", "n1-1 Ascend910B4: 0/32768 MiB, cores 0/20, AI CPUs 0/7, vNPUs 0/4, network 7"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Node = testNode
			inv := newInventory(t, tc.spec)
			client := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}})
			reg, err := NewRegistrar(RegistrarOptions{Node: testNode, Inventory: inv, Patcher: kube.Patcher{Client: client}})
			if err != nil {
				t.Fatal(err)
			}
			node, _ := client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})
			reg.ObserveNode(node)
			if _, err := reg.Sync(context.Background()); err != nil {
				t.Fatalf("sync: %v", err)
			}
			node, _ = client.CoreV1().Nodes().Get(context.Background(), testNode, metav1.GetOptions{})

			b, err := ascendbackend.New(ascendbackend.Options{Chip: tc.spec.Entry, HAMiCore: !tc.spec.HAMiCore}) // the node annotation must win
			if err != nil {
				t.Fatal(err)
			}
			d, err := b.NewDevices(node)
			if err != nil || d == nil {
				t.Fatalf("NewDevices = %v, %v; want the simulated chips", d, err)
			}
			got, _ := d.(device.CardReporter).CardUsage()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decoded chips (-want +got):\n%s", diff)
			}
			s := d.GetStatus()
			for _, want := range tc.status {
				if !strings.Contains(s, want) {
					t.Errorf("GetStatus() = %q, want it to contain %q", s, want)
				}
			}
			for _, not := range tc.noStatus {
				if strings.Contains(s, not) {
					t.Errorf("GetStatus() = %q, want no %q", s, not)
				}
			}
		})
	}
}

// patches returns the annotation keys of each node patch the client saw.
func patches(t *testing.T, client *fake.Clientset) [][]string {
	t.Helper()
	var out [][]string
	for _, a := range client.Actions() {
		p, ok := a.(k8stesting.PatchAction)
		if !ok || a.GetResource().Resource != "nodes" {
			continue
		}
		var keys []string
		for _, k := range []string{"node-register-", "node-handshake-", `"hami-vnpu-core"`} {
			if strings.Contains(string(p.GetPatch()), k) {
				keys = append(keys, strings.Trim(k, `"-`))
			}
		}
		out = append(out, keys)
	}
	return out
}

// TestRegistrarPatchesOnlyChanges walks the handshake: the first report,
// a quiet node, the renewal after the interval, a scheduler's request, and
// a registration someone else changed.
func TestRegistrarPatchesOnlyChanges(t *testing.T) {
	ctx := context.Background()
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	clk := clocktesting.NewFakeClock(start)
	inv := newInventory(t, Spec{Node: testNode, Entry: entryOf(t, "Ascend910B3"), Count: 2})
	client := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode, ResourceVersion: "1"}})
	reg, err := NewRegistrar(RegistrarOptions{Node: testNode, Inventory: inv, Patcher: kube.Patcher{Client: client}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	keys := ascendproto.KeysFor("Ascend910B3")
	observe := func(rv string, edit func(map[string]string)) {
		n, err := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n = n.DeepCopy()
		n.ResourceVersion = rv
		if edit != nil {
			edit(n.Annotations)
		}
		reg.ObserveNode(n)
	}
	step := func(name string, wantWait time.Duration, wantPatches [][]string) {
		t.Helper()
		client.ClearActions()
		wait, err := reg.Sync(ctx)
		if err != nil {
			t.Fatalf("%s: sync: %v", name, err)
		}
		if wait != wantWait {
			t.Errorf("%s: wait %s, want %s", name, wait, wantWait)
		}
		if diff := cmp.Diff(wantPatches, patches(t, client)); diff != "" {
			t.Errorf("%s: node patches (-want +got):\n%s", name, diff)
		}
	}

	step("before the node is observed", 0, nil)
	observe("1", nil)
	step("first report", 30*time.Second, [][]string{{"node-register", "node-handshake", "hami-vnpu-core"}})
	if hs := reg.Observed().Annotations[keys.Handshake]; hs != "" {
		t.Fatalf("test setup: the observed node already has a handshake %q", hs)
	}
	step("informer not caught up", 30*time.Second, nil)

	clk.Step(10 * time.Second)
	observe("2", nil)
	step("quiet node", 20*time.Second, nil)
	n, _ := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
	if want := "Reported_2026.01.02 03:04:05"; n.Annotations[keys.Handshake] != want {
		t.Errorf("handshake = %q, want %q", n.Annotations[keys.Handshake], want)
	}

	clk.Step(20 * time.Second)
	step("renewal", 30*time.Second, [][]string{{"node-handshake"}})

	clk.Step(time.Second)
	observe("3", func(a map[string]string) { a[keys.Handshake] = "Requesting_2026.01.02 03:04:36" })
	step("scheduler request", 30*time.Second, [][]string{{"node-handshake"}})

	clk.Step(time.Second)
	observe("4", func(a map[string]string) { a[keys.Register] = "[]" })
	step("registration overwritten", 30*time.Second, [][]string{{"node-register", "node-handshake"}})
}
