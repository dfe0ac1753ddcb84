package nvidia_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia"
	"github.com/vgpushare/vshare/vgpu-device-plugin/nvidia/nvmlmock"
)

func newA100(t *testing.T) (*nvmlmock.Server, []nvidia.GPU) {
	t.Helper()
	srv, err := nvmlmock.New("dgxa100")
	if err != nil {
		t.Fatal(err)
	}
	gpus, err := nvidia.Discover(srv)
	if err != nil {
		t.Fatalf("Discover: %v", err)
	}
	return srv, gpus
}

func TestDiscoverDGXA100(t *testing.T) {
	srv, gpus := newA100(t)
	if len(gpus) != 8 {
		t.Fatalf("got %d GPUs, want 8", len(gpus))
	}
	want := nvidia.GPU{UUID: srv.UUIDs()[5], Index: 5, Minor: 5, Name: "Mock NVIDIA A100-SXM4-40GB",
		MemoryMiB: 40960, NUMANode: 7, MIGCapable: true}
	if diff := cmp.Diff(want, gpus[5], cmpopts.IgnoreFields(nvidia.GPU{}, "Links")); diff != "" {
		t.Errorf("GPU 5 (-want +got):\n%s", diff)
	}
}

func ptr[T any](v T) *T { return &v }

func TestNewInventoryAppliesConfig(t *testing.T) {
	_, gpus := newA100(t)
	tests := []struct {
		name      string
		edit      func(*config.Config)
		unit      nvidia.MemoryUnit
		wantCards int
		wantCard0 nvidia.Card
		wantUnit  int64 // ToUnit(card0 memory)
	}{
		{
			name:      "defaults",
			unit:      nvidia.UnitMiB,
			wantCards: 8,
			wantCard0: nvidia.Card{Type: "NVIDIA-Mock NVIDIA A100-SXM4-40GB", Count: 10, MemoryMiB: 40960, Cores: 100, Mode: "hami-core"},
			wantUnit:  40960,
		},
		{
			name: "scaling, split count and factor",
			edit: func(c *config.Config) {
				c.NVIDIA.DeviceMemoryScaling = 1.5
				c.NVIDIA.DeviceCoreScaling = 2
				c.NVIDIA.DeviceSplitCount = 4
				c.NVIDIA.GPUMemoryFactor = 1024
			},
			unit:      nvidia.UnitFactor,
			wantCards: 8,
			wantCard0: nvidia.Card{Type: "NVIDIA-Mock NVIDIA A100-SXM4-40GB", Count: 4, MemoryMiB: 61440, Cores: 200, Mode: "hami-core"},
			wantUnit:  60,
		},
		{
			name: "node override with filters and mig mode",
			edit: func(c *config.Config) {
				c.NodeConfigs = []config.NodeConfig{{Name: "other", DeviceSplitCount: ptr[int32](2)}, {
					Name: "node-a", OperatingMode: "mig", DeviceSplitCount: ptr[int32](3),
					DeviceMemoryScaling: ptr(0.5),
					FilterDevices:       &config.FilterDevices{UUID: []string{gpus[0].UUID}, Index: []int32{7}},
				}}
			},
			unit:      nvidia.UnitMiB,
			wantCards: 6,
			wantCard0: nvidia.Card{Type: "NVIDIA-Mock NVIDIA A100-SXM4-40GB", Count: 3, MemoryMiB: 20480, Cores: 100, Mode: "mig"},
			wantUnit:  20480,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default()
			if tc.edit != nil {
				tc.edit(cfg)
			}
			inv := nvidia.NewInventory("node-a", gpus, cfg, tc.unit)
			if len(inv.Cards) != tc.wantCards {
				t.Fatalf("got %d cards, want %d (filtered %v)", len(inv.Cards), tc.wantCards, inv.Filtered)
			}
			if diff := cmp.Diff(tc.wantCard0, inv.Cards[0], cmpopts.IgnoreFields(nvidia.Card{}, "GPU")); diff != "" {
				t.Errorf("card 0 (-want +got):\n%s", diff)
			}
			if got := inv.ToUnit(inv.Cards[0].MemoryMiB); got != tc.wantUnit {
				t.Errorf("ToUnit = %d, want %d", got, tc.wantUnit)
			}
			if _, ok := inv.Card(inv.Cards[0].UUID); !ok {
				t.Errorf("Card(%s) not found", inv.Cards[0].UUID)
			}
		})
	}
}

func TestParseMemoryUnit(t *testing.T) {
	if _, err := nvidia.ParseMemoryUnit("gib"); err == nil || !strings.Contains(err.Error(), `"gib"`) {
		t.Errorf("ParseMemoryUnit(gib) = %v, want an error naming the value", err)
	}
}

func TestMIGApply(t *testing.T) {
	srv, gpus := newA100(t)
	cfg := config.Default()
	inv := nvidia.NewInventory("n", gpus, cfg, nvidia.UnitMiB)
	card := inv.Cards[2]
	mig := nvidia.NewMIG(srv)
	cat := cfg.NVIDIA.KnownMIGGeometries

	if g, err := mig.Geometry(card, cat); err != nil || g != "" {
		t.Fatalf("Geometry before = %q, %v; want none", g, err)
	}
	// group2 = 3 x 2g.10gb + 1 x 1g.5gb: position 3 is the 1g.5gb instance.
	u3, err := mig.Apply(card, cat, "group2", 3, false)
	if err != nil {
		t.Fatalf("Apply group2/3: %v", err)
	}
	if !strings.HasPrefix(u3, "MIG-") {
		t.Errorf("MIG UUID %q does not start with MIG-", u3)
	}
	if g, _ := mig.Geometry(card, cat); g != "group2" {
		t.Errorf("Geometry after = %q, want group2", g)
	}
	u0, err := mig.Apply(card, cat, "group2", 0, true)
	if err != nil {
		t.Fatalf("Apply group2/0 on the same geometry: %v", err)
	}
	if u0 == u3 {
		t.Errorf("positions 0 and 3 share the MIG device %s", u0)
	}
	again, _ := mig.Apply(card, cat, "group2", 3, true)
	if again != u3 {
		t.Errorf("position 3 moved from %s to %s", u3, again)
	}
	if _, err := mig.Apply(card, cat, "group1", 0, true); !errors.Is(err, nvidia.ErrMIGBusy) {
		t.Errorf("switching geometry while in use: err = %v, want ErrMIGBusy", err)
	}
	if _, err := mig.Apply(card, cat, "group1", 6, false); err != nil {
		t.Errorf("switching an idle card to group1: %v", err)
	}
	if g, _ := mig.Geometry(card, cat); g != "group1" {
		t.Errorf("Geometry after switch = %q, want group1", g)
	}
	for _, bad := range []struct {
		group string
		pos   int
	}{{"group9", 0}, {"group1", 7}, {"group1", -1}} {
		if _, err := mig.Apply(card, cat, bad.group, bad.pos, false); !errors.Is(err, nvidia.ErrNoGeometry) {
			t.Errorf("Apply(%s, %d) err = %v, want ErrNoGeometry", bad.group, bad.pos, err)
		}
	}
}
