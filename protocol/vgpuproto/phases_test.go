package vgpuproto

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

// podOf builds a pod whose init containers are "i" (regular) or "s"
// (sidecar) by kinds, and n regular containers.
func podOf(kinds string, n int) *v1.Pod {
	always := v1.ContainerRestartPolicyAlways
	p := &v1.Pod{}
	for i, k := range kinds {
		c := v1.Container{Name: "init-" + string(rune('a'+i))}
		if k == 's' {
			c.RestartPolicy = &always
		}
		p.Spec.InitContainers = append(p.Spec.InitContainers, c)
	}
	for i := 0; i < n; i++ {
		p.Spec.Containers = append(p.Spec.Containers, v1.Container{Name: "app-" + string(rune('a'+i))})
	}
	return p
}

func TestEntryRoles(t *testing.T) {
	tests := []struct {
		name    string
		pod     *v1.Pod
		entries int
		want    []Role
		inits   int
		ctr     []string // EntryContainer's container name per entry
	}{
		{name: "no init containers", pod: podOf("", 2), entries: 2, ctr: []string{"app-a", "app-b"}},
		{name: "init containers without entries", pod: podOf("is", 2), entries: 2, ctr: []string{"app-a", "app-b"}},
		{name: "Volcano v1.10's asking containers only", pod: podOf("i", 3), entries: 2, ctr: []string{"app-a", "app-b"}},
		{name: "init entries first", pod: podOf("isi", 1), entries: 4, inits: 3,
			want: []Role{RoleInit, RoleSidecar, RoleInit, RoleApp}, ctr: []string{"init-a", "init-b", "init-c", "app-a"}},
		{name: "more entries than containers", pod: podOf("i", 1), entries: 3, ctr: []string{"app-a", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, EntryRoles(tc.pod, tc.entries)); diff != "" {
				t.Errorf("EntryRoles (-want +got):\n%s", diff)
			}
			if got := InitEntries(tc.pod, tc.entries); got != tc.inits {
				t.Errorf("InitEntries = %d, want %d", got, tc.inits)
			}
			for i, want := range tc.ctr {
				c, init := EntryContainer(tc.pod, tc.entries, i)
				got := ""
				if c != nil {
					got = c.Name
				}
				if got != want || init != (i < tc.inits) {
					t.Errorf("EntryContainer(%d) = %q, init %v; want %q, init %v", i, got, init, want, i < tc.inits)
				}
			}
		})
	}
}

func TestSpans(t *testing.T) {
	spans, phases := Spans([]Role{RoleSidecar, RoleInit, RoleSidecar, RoleInit, RoleApp, RoleApp})
	want := []Span{{0, 2}, {0, 0}, {1, 2}, {1, 1}, {2, 2}, {2, 2}}
	if diff := cmp.Diff(want, spans); diff != "" || phases != 3 {
		t.Errorf("Spans = %v, %d phases (-want +got):\n%s", spans, phases, diff)
	}
	if spans, phases := Spans(nil); len(spans) != 0 || phases != 1 {
		t.Errorf("Spans(nil) = %v, %d; want none, 1 phase", spans, phases)
	}
}

func TestPeak(t *testing.T) {
	u := func(entry int, card string, mem int64, cores int32) Use[string] {
		return Use[string]{Entry: entry, Card: card, Mem: mem, Cores: cores}
	}
	tests := []struct {
		name  string
		roles []Role
		uses  []Use[string]
		want  []Charge[string]
	}{
		{name: "regular containers add up", uses: []Use[string]{u(0, "A", 1000, 10), u(1, "A", 2000, 20), u(1, "B", 500, 5)},
			want: []Charge[string]{{"A", 3000, 30, 2}, {"B", 500, 5, 1}}},
		{name: "init larger than the app", roles: []Role{RoleInit, RoleApp},
			uses: []Use[string]{u(0, "A", 8000, 60), u(1, "A", 2000, 20)},
			want: []Charge[string]{{"A", 8000, 60, 1}}},
		{name: "sidecar adds to the app", roles: []Role{RoleSidecar, RoleApp},
			uses: []Use[string]{u(0, "A", 1000, 10), u(1, "A", 2000, 20)},
			want: []Charge[string]{{"A", 3000, 30, 2}}},
		{name: "sidecar declared before an init container runs beside it", roles: []Role{RoleSidecar, RoleInit, RoleApp},
			uses: []Use[string]{u(0, "A", 1000, 10), u(1, "A", 6000, 50), u(2, "A", 2000, 20)},
			want: []Charge[string]{{"A", 7000, 60, 2}}},
		{name: "sidecar declared after an init container does not", roles: []Role{RoleInit, RoleSidecar, RoleApp},
			uses: []Use[string]{u(0, "A", 6000, 50), u(1, "A", 1000, 10), u(2, "A", 2000, 20)},
			want: []Charge[string]{{"A", 6000, 50, 2}}},
		{name: "several init containers: the largest", roles: []Role{RoleInit, RoleInit, RoleApp},
			uses: []Use[string]{u(0, "A", 3000, 80), u(1, "A", 9000, 10), u(2, "A", 1000, 5)},
			want: []Charge[string]{{"A", 9000, 80, 1}}},
		{name: "each card on its own", roles: []Role{RoleInit, RoleApp, RoleApp},
			uses: []Use[string]{u(0, "A", 8000, 10), u(0, "B", 8000, 10), u(1, "A", 1000, 40), u(2, "B", 1000, 40)},
			want: []Charge[string]{{"A", 8000, 40, 1}, {"B", 8000, 40, 1}}},
		{name: "a MIG instance counts in every phase", roles: []Role{RoleInit, RoleApp},
			uses: []Use[string]{{Entry: 0, Card: "A", Mem: 5000, Whole: true}, {Entry: 1, Card: "A", Mem: 5000, Whole: true}},
			want: []Charge[string]{{"A", 10000, 0, 2}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, Peak(tc.roles, tc.uses)); diff != "" {
				t.Errorf("Peak (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPeakOfEntries(t *testing.T) {
	a := Device{UUID: "GPU-a", MIGPos: -1, Type: DeviceTypeNVIDIA, Mem: 6000, Cores: 50}
	b := Device{UUID: "GPU-a", MIGPos: -1, Type: DeviceTypeNVIDIA, Mem: 2000, Cores: 20}
	other := Device{UUID: "MLU-0", MIGPos: -1, Type: "MLU", Mem: 1, Cores: 1}
	got := PeakOfEntries([]Role{RoleInit, RoleApp}, [][]Device{{a, other}, {b}})
	if diff := cmp.Diff([]Charge[string]{{"GPU-a", 6000, 50, 1}}, got); diff != "" {
		t.Errorf("PeakOfEntries (-want +got):\n%s", diff)
	}
}
