package quality

import "testing"

func TestParseSeeds(t *testing.T) {
	got, err := ParseSeeds("42-44,50")
	if err != nil || len(got) != 4 || got[0] != 42 || got[2] != 44 || got[3] != 50 {
		t.Errorf("ParseSeeds(42-44,50) = %v, %v", got, err)
	}
	for _, bad := range []string{"", "x", "5-3", "1-x"} {
		if _, err := ParseSeeds(bad); err == nil {
			t.Errorf("ParseSeeds(%q) succeeded, want an error", bad)
		}
	}
}
