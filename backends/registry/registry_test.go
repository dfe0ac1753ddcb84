package registry

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// withChips returns the default configuration restricted to the vnpus
// entries named by commonWord, in that order.
func withChips(t *testing.T, words ...string) *config.Config {
	t.Helper()
	cfg := config.Default()
	var chips []config.VNPUConfig
	for _, w := range words {
		c, ok := cfg.VNPUs.Chip(w)
		if !ok {
			t.Fatalf("no built-in vnpus entry %s", w)
		}
		chips = append(chips, c)
	}
	cfg.VNPUs.Configs = chips
	return cfg
}

func backendNames(bs []device.Backend) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name())
	}
	return out
}

// TestBuildFollowsTheVNPUEntries is what a configuration
// generation change does: the plugin calls Build with the new
// configuration, so an added vnpus entry becomes a chip type and a removed
// one stops being served.
func TestBuildFollowsTheVNPUEntries(t *testing.T) {
	args := pluginargs.Args{AscendHAMiVNPUEnable: true}
	tests := []struct {
		name string
		cfg  *config.Config
		want []string
	}{
		{name: "one chip", cfg: withChips(t, "Ascend310P"), want: []string{"Ascend310P"}},
		{name: "a chip added at the next generation", cfg: withChips(t, "Ascend310P", "Ascend910B3"), want: []string{"Ascend310P", "Ascend910B3"}},
		{name: "a chip removed", cfg: withChips(t, "Ascend910B3"), want: []string{"Ascend910B3"}},
		{name: "no configuration: the built-in catalogue", want: backendNames(mustBackends(t, args, config.Default()))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			bs := mustBackends(t, args, tc.cfg)
			if diff := cmp.Diff(tc.want, backendNames(bs)); diff != "" {
				t.Errorf("backends (-want +got):\n%s", diff)
			}
			for _, b := range bs {
				if l, ok := b.(device.NodeLocker); !ok || l.LockName() != ascendproto.NodeLockName {
					t.Errorf("%s: node lock %v, want %s", b.Name(), b, ascendproto.NodeLockName)
				}
			}
		})
	}
	if len(backendNames(mustBackends(t, args, nil))) == 0 {
		t.Error("Build without a configuration built no Ascend backend")
	}
}

func mustBackends(t *testing.T, args pluginargs.Args, cfg *config.Config) []device.Backend {
	t.Helper()
	bs, err := Build(args, cfg, nil)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return bs
}

func TestBuildAscendModeFromTheConfig(t *testing.T) {
	cfg := withChips(t, "Ascend910B3")
	cfg.VNPUs.HAMiVNPUCore = true
	bs := mustBackends(t, pluginargs.Args{AscendHAMiVNPUEnable: true}, cfg)
	d, err := bs[0].NewDevices(npuNodeOf("Ascend910B3"))
	if err != nil || d == nil {
		t.Fatalf("NewDevices = %v, %v", d, err)
	}
	if got := d.GetStatus(); !strings.HasPrefix(got, "hami-core") {
		t.Errorf("status %q: a node without hami-vnpu-core should follow vnpus.hamiVnpuCore", got)
	}
}

// npuNodeOf is a node with one card registered for the chip type.
func npuNodeOf(commonWord string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}
	n.Annotations = map[string]string{ascendproto.KeysFor(commonWord).Register: `[{"id":"NPU-0","count":7,"devmem":65536,"health":true}]`}
	return n
}
