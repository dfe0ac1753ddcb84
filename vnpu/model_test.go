package vnpu

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// b3 is HAMi's 910B3 entry: 20 AI cores, 7 AI CPUs, 64 GiB.
func b3(t *testing.T) *Chip {
	t.Helper()
	c, err := NewChip("910B3", Resources{MemoryMiB: 65536, AICore: 20, AICPU: 7}, []Template{
		{Name: "vir10_3c_32g", Resources: Resources{MemoryMiB: 32768, AICore: 10, AICPU: 3}},
		{Name: "vir05_1c_16g", Resources: Resources{MemoryMiB: 16384, AICore: 5, AICPU: 1}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestNewChipRejects(t *testing.T) {
	total := Resources{MemoryMiB: 1000, AICore: 4, AICPU: 2}
	tests := []struct {
		name      string
		total     Resources
		templates []Template
		want      error
	}{
		{"no memory", Resources{AICore: 1}, nil, ErrInvalidChip},
		{"no cores", Resources{MemoryMiB: 1}, nil, ErrInvalidChip},
		{"unnamed template", total, []Template{{Resources: Resources{MemoryMiB: 1}}}, ErrInvalidTemplate},
		{"duplicate", total, []Template{{Name: "a", Resources: Resources{MemoryMiB: 1}}, {Name: "a", Resources: Resources{MemoryMiB: 2}}}, ErrInvalidTemplate},
		{"larger than the chip", total, []Template{{Name: "a", Resources: Resources{MemoryMiB: 1, AICPU: 3}}}, ErrInvalidTemplate},
		{"no memory in a template", total, []Template{{Name: "a", Resources: Resources{AICore: 1}}}, ErrInvalidTemplate},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewChip("x", tc.total, tc.templates); !errors.Is(err, tc.want) {
				t.Errorf("err = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRoundUp(t *testing.T) {
	c := b3(t)
	tests := []struct {
		mem      int64
		want     string
		wantMem  int64
		wantFits bool
	}{
		{1, "vir05_1c_16g", 16384, true},
		{16384, "vir05_1c_16g", 16384, true},
		{16385, "vir10_3c_32g", 32768, true},
		{40000, "", 65536, true},
		{65536, "", 65536, true},
		{65537, "", 0, false},
	}
	for _, tc := range tests {
		got, ok := c.RoundUp(tc.mem)
		if ok != tc.wantFits || got.Name != tc.want || got.MemoryMiB != tc.wantMem {
			t.Errorf("RoundUp(%d) = %q %d MiB %v, want %q %d MiB %v", tc.mem, got.Name, got.MemoryMiB, ok, tc.want, tc.wantMem, tc.wantFits)
		}
	}
	if names := []string{c.Templates()[0].Name, c.Templates()[1].Name}; names[0] != "vir05_1c_16g" {
		t.Errorf("catalogue order %v, want smallest memory first", names)
	}
	if w, ok := c.Template(""); !ok || !w.Whole() || w.Resources != c.Total {
		t.Errorf("Template(\"\") = %+v, want the whole chip", w)
	}
	if _, ok := c.Template("vir99"); ok {
		t.Error("an unknown template was found")
	}
}

func TestSliceCheck(t *testing.T) {
	c := Ascend310P()
	tmpl := func(name string) Template {
		t.Helper()
		tp, ok := c.Template(name)
		if !ok {
			t.Fatalf("no template %s", name)
		}
		return tp
	}
	tests := []struct {
		name   string
		placed []string
		add    string
		want   Conflict
	}{
		{"empty chip takes anything", nil, Vir04, NoConflict},
		{"two vir04 fill the AI cores", []string{Vir04, Vir04C3}, Vir01, ConflictAICore},
		{"AI CPUs run out first", []string{Vir04, Vir02}, Vir02, ConflictAICPU},
		{"the low-level variant fits where the high one does not", []string{Vir04, Vir02}, Vir02C1, NoConflict},
		{"dvpp pairs with ndvpp", []string{Vir04C4DVPP}, Vir04C3NDVPP, NoConflict},
		{"dvpp refuses shared DVPP", []string{Vir04C4DVPP}, Vir02C1, ConflictDVPP},
		{"shared DVPP refuses dvpp", []string{Vir02C1}, Vir04C4DVPP, ConflictDVPP},
		{"whole chip needs an empty chip", []string{Vir01}, "", ConflictWhole},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var s Slice
			for _, p := range tc.placed {
				if got := s.Check(c, tmpl(p)); got != NoConflict {
					t.Fatalf("placing %s: %v", p, got)
				}
				s = s.Add(tmpl(p))
			}
			if got := s.Check(c, tmpl(tc.add)); got != tc.want {
				t.Errorf("Check(%s) = %v, want %v", tc.add, got, tc.want)
			}
			before := s
			if s.Add(tmpl(tc.add)).Remove(tmpl(tc.add)) != before {
				t.Error("Remove is not the inverse of Add")
			}
		})
	}
}

func TestSliceCheckMemory(t *testing.T) {
	c := b3(t)
	big, _ := c.Template("vir10_3c_32g")
	// A template of few cores but much memory: memory is what runs out.
	wide := Template{Name: "wide", Resources: Resources{MemoryMiB: 40000, AICore: 1}}
	if got := (Slice{}).Add(big).Check(c, wide); got != ConflictMemory {
		t.Errorf("Check = %v, want %v", got, ConflictMemory)
	}
	if free := (Slice{}).Add(big).Free(c); free != (Resources{MemoryMiB: 32768, AICore: 10, AICPU: 4}) {
		t.Errorf("Free = %+v", free)
	}
}

func TestAscend310PCatalogue(t *testing.T) {
	c := Ascend310P()
	if c == nil {
		t.Fatal("the built-in catalogue does not validate")
	}
	type fig struct {
		Name      string
		Core, CPU int32
		MemGiB    int64
		DVPP      string
	}
	var got []fig
	for _, tp := range c.Templates() {
		got = append(got, fig{tp.Name, tp.AICore, tp.AICPU, tp.MemoryMiB / 1024, tp.DVPP.String()})
	}
	want := []fig{
		{Vir01, 1, 1, 3, "shared"}, {Vir02C1, 2, 1, 6, "shared"}, {Vir02, 2, 2, 6, "shared"},
		{Vir04C3, 4, 3, 12, "shared"}, {Vir04C3NDVPP, 4, 3, 12, "none"}, {Vir04, 4, 4, 12, "shared"}, {Vir04C4DVPP, 4, 4, 12, "all"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("catalogue (-want +got):\n%s", diff)
	}
}
