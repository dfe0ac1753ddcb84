package vnpu

import (
	"errors"
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

func TestBatchScoreSpread(t *testing.T) {
	got := BatchScoreSpread([]Candidate{
		{Node: "empty", FreeAICores: 8},
		{Node: "busy", FreeAICores: 2},
		{Node: "downgraded", FreeAICores: 16, Downgraded: true},
	})
	want := map[string]float64{"empty": 100, "busy": 100 * 2.0 / 3, "downgraded": 100 * 1.0 / 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("scores (-want +got):\n%s", diff)
	}
}

func TestAscend310PWithCores(t *testing.T) {
	if c, err := Ascend310PWithCores(8); err != nil || c.Total != Ascend310P().Total {
		t.Errorf("8 cores = %+v, %v: want the built-in catalogue", c, err)
	}
	c, err := Ascend310PWithCores(10)
	if err != nil {
		t.Fatalf("10 cores: %v", err)
	}
	if c.Total != (Resources{MemoryMiB: 30 * 1024, AICore: 10, AICPU: 7}) || len(c.Templates()) != 7 {
		t.Errorf("10 cores = %+v with %d templates", c.Total, len(c.Templates()))
	}
	// Two vir04_3c and a vir02_1c fill a 10-core chip's AI cores.
	var s Slice
	for _, name := range []string{Vir04C3, Vir04C3, Vir02C1} {
		tp, _ := c.Template(name)
		if got := s.Check(c, tp); got != NoConflict {
			t.Fatalf("placing %s: %v", name, got)
		}
		s = s.Add(tp)
	}
	if tp, _ := c.Template(Vir01); s.Check(c, tp) != ConflictAICore {
		t.Errorf("a full 10-core chip took another vNPU")
	}
	if _, err := Ascend310PWithCores(2); !errors.Is(err, ErrInvalidTemplate) {
		t.Errorf("2 cores: err = %v, want ErrInvalidTemplate", err)
	}
}
