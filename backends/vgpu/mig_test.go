package vgpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func migNode() *v1.Node {
	return vgpuNode([]card{gpu("GPU-m", 40960).withType("NVIDIA-A100-SXM4-40GB").withCount(7).inMode(vgpuproto.ModeMIG)})
}

func TestMIGMatching(t *testing.T) {
	tests := []struct {
		name     string
		sequence []int64 // MiB requested by successive pods
		want     []string
		wantMem  int64 // accounted on the card at the end
	}{
		{name: "the smallest instance of any geometry on an idle card", sequence: []int64{4000},
			want: []string{"GPU-m[group1-0],NVIDIA,4000,0:"}, wantMem: 5120},
		{name: "the current geometry's free instances", sequence: []int64{4000, 5120, 100},
			want:    []string{"GPU-m[group1-0],NVIDIA,4000,0:", "GPU-m[group1-1],NVIDIA,5120,0:", "GPU-m[group1-2],NVIDIA,100,0:"},
			wantMem: 3 * 5120},
		{name: "a larger request switches an idle card to the geometry holding it", sequence: []int64{8000, 4000, 4000},
			want:    []string{"GPU-m[group2-0],NVIDIA,8000,0:", "GPU-m[group2-3],NVIDIA,4000,0:", "GPU-m[group2-1],NVIDIA,4000,0:"},
			wantMem: 10240 + 5120 + 10240},
		{name: "the whole card", sequence: []int64{40000}, want: []string{"GPU-m[group4-0],NVIDIA,40000,0:"}, wantMem: 40960},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t), migNode())
			var got []string
			for i, mem := range tc.sequence {
				got = append(got, allocated(t, d, one("p"+string(rune('a'+i)), 1, mem, 0), device.PolicyBinpack))
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("vgpu-ids-new (-want +got):\n%s", diff)
			}
			if cards, _ := d.CardUsage(); cards[0].MemoryUsedMiB != tc.wantMem {
				t.Errorf("accounted memory = %d, want %d", cards[0].MemoryUsedMiB, tc.wantMem)
			}
		})
	}
}

func TestMIGRefusals(t *testing.T) {
	b := newBackend(t)
	busy := devicesOf(t, b, migNode(), placed(one("a", 1, 4000, 0), "GPU-m[group1-0],NVIDIA,4000,0:"))
	if st := busy.FilterNode(one("p", 1, 8000, 0), ""); st.Code != device.Unschedulable || !strings.Contains(st.Message(), ReasonMIGBusy) {
		t.Errorf("8000 MiB next to a 1g instance: %+v, want %q (resolvable)", st, ReasonMIGBusy)
	}
	idle := devicesOf(t, b, migNode())
	if st := idle.FilterNode(one("p", 1, 50000, 0), ""); st.Code != device.UnschedulableAndUnresolvable ||
		!strings.Contains(st.Message(), ReasonNoMIGInstance) {
		t.Errorf("50000 MiB: %+v, want %q (unresolvable)", st, ReasonNoMIGInstance)
	}
	if st := idle.FilterNode(one("p", 1, 100, 0, vgpuproto.AnnotationMode, vgpuproto.ModeHAMiCore), ""); st.IsSuccess() {
		t.Error("a hami-core pod fits a mig card")
	}
	if st := idle.FilterNode(one("p", 1, 100, 0, vgpuproto.AnnotationMode, vgpuproto.ModeMIG), ""); !st.IsSuccess() {
		t.Errorf("a mig pod on a mig card: %v", st.Message())
	}
	for _, bad := range []string{"GPU-m[group2-0],NVIDIA,1,0:", "GPU-m[group1-0],NVIDIA,1,0:"} {
		if err := busy.DeepCopy().AddResource(placed(one("x", 1, 1, 0), bad)); err == nil {
			t.Errorf("AddResource(%s) next to group1-0 accepted a clashing MIG instance", bad)
		}
	}
}

func TestMIGCatalogueFromConfig(t *testing.T) {
	b := newBackend(t, func(c *config.NVIDIAConfig) {
		c.KnownMIGGeometries = []config.AllowedMIGGeometries{{Models: []string{"T4"}, Geometries: []config.MIGGeometry{
			{Group: "halves", Instances: []config.MIGTemplate{{Name: "half", Memory: 8192, Count: 2}}}}}}
	})
	d := devicesOf(t, b, vgpuNode([]card{gpu("GPU-t", 16384).withType("NVIDIA-Tesla T4").inMode(vgpuproto.ModeMIG)}))
	if got := allocated(t, d, one("p", 1, 100, 0), ""); got != "GPU-t[halves-0],NVIDIA,100,0:" {
		t.Errorf("vgpu-ids-new = %q", got)
	}
	dflt := devicesOf(t, newBackend(t), vgpuNode([]card{gpu("GPU-t", 16384).withType("NVIDIA-Tesla T4").inMode(vgpuproto.ModeMIG)}))
	if got := allocated(t, dflt, one("p", 1, 100, 0), ""); got != "GPU-t,NVIDIA,100,0:" {
		t.Errorf("without a geometry for T4 the card is hami-core; vgpu-ids-new = %q", got)
	}
}
