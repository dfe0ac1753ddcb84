package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin/fakekubelet"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

func parseFlags(t *testing.T, args ...string) *Options {
	t.Helper()
	o := NewOptions()
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return o
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		name string
		args []string
		want string // substring of the error; empty: valid
	}{
		{name: "valid", args: []string{"--node-name=n1", "--chip=Ascend910B3"}},
		{name: "no node", args: []string{"--node-name=", "--chip=Ascend910B3"}, want: "--node-name"},
		{name: "no chip", args: []string{"--node-name=n1"}, want: `--chip="": want the commonWord`},
		{name: "bad mode", args: []string{"--node-name=n1", "--chip=Ascend910B3", "--mode=mig"}, want: `--mode="mig"`},
		{name: "too many chips", args: []string{"--node-name=n1", "--chip=Ascend910B3", "--chips=257"}, want: "--chips=257: want 1 to 256"},
		{name: "handshake too slow", args: []string{"--node-name=n1", "--chip=Ascend910B3", "--handshake-interval=1m"}, want: "--handshake-interval=1m0s"},
		{name: "kubelet socket name", args: []string{"--node-name=n1", "--chip=Ascend910B3", "--socket-name=kubelet.sock"}, want: "--socket-name"},
		{name: "resource without domain", args: []string{"--node-name=n1", "--chip=Ascend910B3", "--resource-name=Ascend910B3"}, want: "--resource-name"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := parseFlags(t, tc.args...).Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate() = %v, want nil", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate() = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestOptionsSpec(t *testing.T) {
	cfg, err := config.Parse([]byte(`
vnpus:
  hamiVnpuCore: true
  vnpuDeviceSplitCount: 6
  configs:
  - chipName: 910B3
    commonWord: Ascend910B3
    resourceName: example.com/npu
    resourceMemoryName: example.com/npu-memory
    memoryCapacity: 65536
    aiCore: 20
    aiCPU: 7
    templates:
    - {name: vir05_1c_16g, memory: 16384, aiCore: 5, aiCPU: 1}
`))
	if err != nil {
		t.Fatal(err)
	}
	s, err := parseFlags(t, "--node-name=n1", "--chip=Ascend910B3", "--chips=3").spec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Entry.ResourceName != "example.com/npu" || !s.HAMiCore || s.SplitCount != 6 || s.Count != 3 {
		t.Errorf("spec = %+v, want the ConfigMap's resource, hami-core mode and split count 6", s)
	}
	s, err = parseFlags(t, "--node-name=n1", "--chip=Ascend910B3", "--mode=template", "--resource-name=huawei.com/x", "--split-count=2").spec(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if s.Entry.ResourceName != "huawei.com/x" || s.HAMiCore || s.SplitCount != 2 {
		t.Errorf("spec = %+v, want the flags to override the ConfigMap", s)
	}
	if _, err := parseFlags(t, "--node-name=n1", "--chip=Ascend910B9").spec(cfg); err == nil || !strings.Contains(err.Error(), "entries: Ascend910B3") {
		t.Errorf("unknown chip: err = %v, want one listing the entries", err)
	}
}

func TestNewInventoryErrors(t *testing.T) {
	e910, e310 := entryOf(t, "Ascend910B3"), entryOf(t, "Ascend310P")
	for _, tc := range []struct {
		name string
		spec Spec
		want string
	}{
		{"no chips", Spec{Entry: e910}, "chips=0"},
		{"numa list too short", Spec{Entry: e910, Count: 3, NUMA: []int{0, 1}}, "numa has 2 values for 3 chips"},
		{"network on 310P", Spec{Entry: e310, Count: 1, NetworkIDs: []int64{1}}, "only Ascend910* chips"},
		{"unhealthy out of range", Spec{Entry: e910, Count: 2, Unhealthy: []int{2}}, "unhealthy chip 2: want 0 to 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.spec.Node = testNode
			if _, err := NewInventory(tc.spec); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewInventory = %v, want an error containing %q", err, tc.want)
			}
		})
	}
	if got := DefaultSplitCount(e310); got != 7 {
		t.Errorf("DefaultSplitCount(Ascend310P) = %d, want 21527/3072 = 7", got)
	}
}

// TestServe runs the agent's wiring against a fake API server and a fake
// kubelet: the node is registered and the plugin registers its resource.
func TestServe(t *testing.T) {
	dir := t.TempDir()
	kubelet := fakekubelet.Start(t, dir)
	client := fake.NewSimpleClientset(&v1.Node{ObjectMeta: metav1.ObjectMeta{Name: testNode}})
	o := parseFlags(t, "--node-name=n1", "--chip=Ascend310P", "--chips=2", "--kubelet-socket-dir="+dir, "--handshake-interval=5s")
	if err := o.Validate(); err != nil {
		t.Fatal(err)
	}
	spec, err := o.spec(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Serve(ctx, ServeOptions{Options: o, Client: client, Inventory: newInventory(t, spec)}) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	select {
	case r := <-kubelet.Requests:
		if r.ResourceName != "huawei.com/Ascend310P" || r.Endpoint != "Ascend310P.sock" {
			t.Errorf("Register(%+v), want huawei.com/Ascend310P on Ascend310P.sock", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the agent did not register with the kubelet")
	}
	key := ascendproto.KeysFor("Ascend310P").Register
	deadline := time.Now().Add(10 * time.Second)
	for {
		n, err := client.CoreV1().Nodes().Get(ctx, testNode, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(n.Annotations[key], `"id":"Ascend310P-n1-1"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("node annotations %v: no registration of chip Ascend310P-n1-1 under %s", n.Annotations, key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestLoadConfig(t *testing.T) {
	ctx := context.Background()
	o := parseFlags(t, "--node-name=n1", "--chip=Ascend910B3")
	cfg, err := loadConfig(ctx, o, fake.NewSimpleClientset())
	if err != nil || len(cfg.VNPUs.Configs) != len(config.Default().VNPUs.Configs) {
		t.Fatalf("no ConfigMap: %v, %v; want the built-in catalogue", cfg, err)
	}
	cm := &v1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: config.DefaultConfigMapNamespace, Name: config.DefaultConfigMapName},
		Data: map[string]string{config.ConfigKey: "vnpus:\n  configs: []\n"}}
	cfg, err = loadConfig(ctx, o, fake.NewSimpleClientset(cm))
	if err != nil || len(cfg.VNPUs.Configs) != 0 {
		t.Fatalf("ConfigMap without chips: %v, %v; want an empty catalogue", cfg, err)
	}
	cm.Data[config.ConfigKey] = "vnpus: 3\n"
	if _, err := loadConfig(ctx, o, fake.NewSimpleClientset(cm)); err == nil {
		t.Error("malformed ConfigMap accepted")
	}
}
