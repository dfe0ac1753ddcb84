package cardfit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCordon(t *testing.T) {
	ids := []string{"GPU-0", "GPU-1", "GPU-2"}
	tests := []struct {
		name        string
		annotations map[string]string
		want        []bool
		// wantErrs are substrings, one slice per expected error.
		wantErrs [][]string
	}{
		{name: "none"},
		{name: "blank", annotations: map[string]string{"a": "  "}},
		{name: "other key ignored", annotations: map[string]string{"c": "GPU-0"}},
		{name: "HAMi's parsing: spaces and empty entries", annotations: map[string]string{"a": " GPU-0, ,GPU-2,"},
			want: []bool{true, false, true}},
		{name: "both keys add up", annotations: map[string]string{"a": "GPU-0", "b": "GPU-1"},
			want: []bool{true, true, false}},
		{name: "unknown and malformed, each key its own error",
			annotations: map[string]string{"a": "GPU-0,GPU-9", "b": "GPU-1;GPU-2"},
			want:        []bool{true, false, false},
			wantErrs: [][]string{{`node annotation a="GPU-0,GPU-9"`, `"GPU-9" names no card of the node (its cards: GPU-0, GPU-1, GPU-2)`},
				{`node annotation b="GPU-1;GPU-2"`, `"GPU-1;GPU-2" malformed`}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, errs := Cordon(tt.annotations, ids, "a", "b")
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("cordoned (-want +got):\n%s", diff)
			}
			if len(errs) != len(tt.wantErrs) {
				t.Fatalf("errors %v, want %d", errs, len(tt.wantErrs))
			}
			for i, subs := range tt.wantErrs {
				for _, s := range subs {
					if !strings.Contains(errs[i].Error(), s) {
						t.Errorf("error %q does not contain %q", errs[i], s)
					}
				}
			}
		})
	}
}

func TestCordonListsAFewCards(t *testing.T) {
	ids := make([]string, 12)
	for i := range ids {
		ids[i] = "GPU-" + string(rune('a'+i))
	}
	_, errs := Cordon(map[string]string{"a": "GPU-z"}, ids, "a")
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "GPU-h and 4 more") {
		t.Errorf("errors %v, want the first 8 cards and a count", errs)
	}
}
