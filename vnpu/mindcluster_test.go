package vnpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTemplateFor(t *testing.T) {
	tests := []struct {
		cores       int
		level, dvpp string
		want, err   string
	}{
		{1, "", "", Vir01, ""},
		{2, "", "", Vir02C1, ""},
		{2, LevelLow, "", Vir02C1, ""},
		{2, LevelHigh, "", Vir02, ""},
		{4, "", "", Vir04C3, ""},
		{4, LevelHigh, "", Vir04, ""},
		{4, LevelHigh, DVPPYes, Vir04C4DVPP, ""},
		{4, LevelLow, DVPPNo, Vir04C3NDVPP, ""},
		{3, "", "", "", "1, 2 or 4 AI cores"},
		{2, "medium", "", "", "vnpu-level"},
		{4, "", "maybe", "", "vnpu-dvpp"},
	}
	for _, tc := range tests {
		got, err := TemplateFor(tc.cores, tc.level, tc.dvpp)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("TemplateFor(%d, %q, %q) error = %v, want %q", tc.cores, tc.level, tc.dvpp, err, tc.err)
			}
		case err != nil || got != tc.want:
			t.Errorf("TemplateFor(%d, %q, %q) = %q, %v, want %q", tc.cores, tc.level, tc.dvpp, got, err, tc.want)
		}
	}
}

func TestDowngrade(t *testing.T) {
	c := Ascend310P()
	for _, from := range []string{Vir02, Vir04} {
		to, ok := Downgrade(from)
		a, _ := c.Template(from)
		b, _ := c.Template(to)
		if !ok || b.AICPU != a.AICPU-1 || b.AICore != a.AICore || b.MemoryMiB != a.MemoryMiB {
			t.Errorf("Downgrade(%s) = %s %v: want the same template with one AI CPU less", from, to, ok)
		}
	}
	for _, name := range []string{Vir01, Vir02C1, Vir04C3, Vir04C3NDVPP, Vir04C4DVPP} {
		if _, ok := Downgrade(name); ok {
			t.Errorf("Downgrade(%s) found a variant", name)
		}
	}
}

func TestBatchScore(t *testing.T) {
	got := BatchScore([]Candidate{
		{Node: "empty", FreeAICores: 8},
		{Node: "busy", FreeAICores: 2},
		{Node: "downgraded", FreeAICores: 1, Downgraded: true},
		{Node: "busy-too", FreeAICores: 2},
	})
	want := map[string]float64{"busy": 100, "busy-too": 75, "empty": 50, "downgraded": 25}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
	if len(BatchScore(nil)) != 0 {
		t.Error("no candidates gave scores")
	}
}
