package inventory

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/config"
)

// catalogue has one model, "A100-40", with two geometries: seven 1g
// instances, or one 3g and two 2g ones (in that catalogue order); and a
// "BROKEN" model whose only geometry has no usable instance.
func catalogue() []config.AllowedMIGGeometries {
	return []config.AllowedMIGGeometries{
		{Models: []string{"A100-40"}, Geometries: []config.MIGGeometry{
			{Group: "sevenths", Instances: []config.MIGTemplate{{Name: "1g.5gb", Memory: 5120, Count: 7}}},
			{Group: "mixed", Instances: []config.MIGTemplate{
				{Name: "3g.20gb", Memory: 20480, Count: 1}, {Name: "2g.10gb", Memory: 10240, Count: 2}}},
		}},
		{Models: []string{"BROKEN"}, Geometries: []config.MIGGeometry{
			{Group: "none", Instances: []config.MIGTemplate{{Name: "0g", Memory: 0, Count: 3}}}}},
	}
}

func TestLayoutFor(t *testing.T) {
	if l := LayoutFor(catalogue(), "NVIDIA-T4"); l != nil {
		t.Errorf("layout of a model without geometry = %+v, want nil", l)
	}
	if l := LayoutFor(catalogue(), "NVIDIA-BROKEN"); l != nil {
		t.Errorf("layout of a model without usable instance = %+v, want nil", l)
	}
	l := LayoutFor(catalogue(), "NVIDIA-A100-40GB")
	if l == nil {
		t.Fatal("no layout for NVIDIA-A100-40GB: the model names match as substrings")
	}
	want := []Group{
		{Name: "sevenths", Instances: []Instance{{Name: "1g.5gb", MemMiB: 5120, Start: 0, Count: 7}}, bySize: []int{0}},
		{Name: "mixed", Instances: []Instance{{Name: "3g.20gb", MemMiB: 20480, Start: 0, Count: 1},
			{Name: "2g.10gb", MemMiB: 10240, Start: 1, Count: 2}}, bySize: []int{1, 0}},
	}
	if diff := cmp.Diff(want, l.Groups, cmp.AllowUnexported(Group{})); diff != "" {
		t.Errorf("groups (-want +got):\n%s", diff)
	}
	if g := l.GroupIndex("mixed"); g != 1 {
		t.Errorf("GroupIndex(mixed) = %d, want 1", g)
	}
	if g := l.GroupIndex("other"); g != -1 {
		t.Errorf("GroupIndex(other) = %d, want -1", g)
	}
	if mem, ok := l.InstanceAt(1, 2); !ok || mem != 10240 {
		t.Errorf("InstanceAt(mixed, 2) = %d, %v; want 10240, true", mem, ok)
	}
	if _, ok := l.InstanceAt(1, 3); ok {
		t.Error("InstanceAt(mixed, 3) found an instance past the geometry's positions")
	}
}

func TestLayoutFit(t *testing.T) {
	l := LayoutFor(catalogue(), "A100-40")
	tests := []struct {
		name     string
		group    int16
		used     uint64
		mem      int64
		wantG    int16
		wantPos  int16
		wantMem  int64
		ok, busy bool
	}{
		{name: "idle card: the smallest instance of any geometry", group: -1, mem: 4000, wantG: 0, wantPos: 0, wantMem: 5120, ok: true},
		{name: "idle card: a larger request picks the geometry holding it", group: -1, mem: 8000, wantG: 1, wantPos: 1, wantMem: 10240, ok: true},
		{name: "current geometry: the next free position", group: 0, used: 0b11, mem: 100, wantG: 0, wantPos: 2, wantMem: 5120, ok: true},
		{name: "current geometry: the smallest instance that holds it", group: 1, used: 0b10, mem: 9000, wantG: 1, wantPos: 2, wantMem: 10240, ok: true},
		{name: "busy: another geometry would hold it once idle", group: 0, used: 0b1, mem: 8000, wantG: -1, wantPos: -1, busy: true},
		{name: "nothing holds it", group: -1, mem: 30000, wantG: -1, wantPos: -1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g, pos, mem, ok, busy := l.Fit(tc.group, tc.used, tc.mem)
			if g != tc.wantG || pos != tc.wantPos || mem != tc.wantMem || ok != tc.ok || busy != tc.busy {
				t.Errorf("Fit = (%d, %d, %d, %v, %v), want (%d, %d, %d, %v, %v)", g, pos, mem, ok, busy,
					tc.wantG, tc.wantPos, tc.wantMem, tc.ok, tc.busy)
			}
		})
	}
}

func TestGroupDescribe(t *testing.T) {
	l := LayoutFor(catalogue(), "A100-40")
	if got, want := l.Groups[1].Describe(0b101), "mig mixed: 3g.20gb x1, 2g.10gb x1 of 3 instances"; got != want {
		t.Errorf("Describe = %q, want %q", got, want)
	}
}
