package gpushareproto

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeIndex checks the reader of volcano.sh/gpu-index: a refusal
// names the annotation; an accepted value lists want distinct indices in
// [0, cards), and is exactly what EncodeIndex writes for them (one spelling
// per card), which IndexIs recognises.
func FuzzDecodeIndex(f *testing.F) {
	for _, s := range []struct {
		value string
		want  uint8
		cards uint16
	}{
		{"3", 1, 4}, {"0,2", 2, 4}, {"0,0", 2, 4}, {"4", 1, 4}, {"03", 1, 4}, {"+1", 1, 4}, {"", 1, 4}, {"1", 2, 1},
		{"0,", 1, 4}, {" 1", 1, 4}, {"999999999", 1, 1024},
	} {
		f.Add(s.value, s.want, s.cards)
	}
	f.Fuzz(func(t *testing.T, value string, want uint8, cards uint16) {
		n := int(cards) % (MaxCards + 1)
		ids, err := DecodeIndex(value, int64(want), n)
		if err != nil {
			if ids != nil || !strings.Contains(err.Error(), AnnotationGPUIndex) {
				t.Errorf("DecodeIndex(%q, %d, %d) = %v, %v; want no indices and an error naming %s", value, want, n, ids, err,
					AnnotationGPUIndex)
			}
			return
		}
		if len(ids) != int(want) {
			t.Fatalf("DecodeIndex(%q, %d, %d) = %v: %d indices", value, want, n, ids, len(ids))
		}
		seen := map[int]bool{}
		for _, id := range ids {
			if id < 0 || id >= n || seen[id] {
				t.Errorf("DecodeIndex(%q, %d, %d) = %v: index %d out of range or twice", value, want, n, ids, id)
			}
			seen[id] = true
		}
		if enc := EncodeIndex(ids); enc != value || !IndexIs(value, ids) {
			t.Errorf("EncodeIndex(DecodeIndex(%q)) = %q, IndexIs = %v; want the value itself", value, enc, IndexIs(value, ids))
		}
	})
}

// FuzzDecodeUnhealthy checks the reader of volcano.sh/gpu-unhealthy-ids: a
// refusal names the annotation; an accepted value flags at most cards
// cards, and the flagged indices written back decode the same.
func FuzzDecodeUnhealthy(f *testing.F) {
	for _, s := range []string{"", "1", "1, 3", "1,,1", " ,", "4", "-1", "+1", "x", "01"} {
		f.Add(s, uint16(4))
	}
	f.Fuzz(func(t *testing.T, value string, cards uint16) {
		n := int(cards) % (MaxCards + 1)
		flags, err := DecodeUnhealthy(value, n)
		if err != nil {
			if flags != nil || !strings.Contains(err.Error(), AnnotationUnhealthyIDs) {
				t.Errorf("DecodeUnhealthy(%q, %d) = %v, %v; want no flags and an error naming %s", value, n, flags, err,
					AnnotationUnhealthyIDs)
			}
			return
		}
		if flags == nil {
			return
		}
		if len(flags) != n {
			t.Fatalf("DecodeUnhealthy(%q, %d): %d flags", value, n, len(flags))
		}
		var ids []int
		for i, sick := range flags {
			if sick {
				ids = append(ids, i)
			}
		}
		again, err := DecodeUnhealthy(EncodeIndex(ids), n)
		if err != nil || !cmp.Equal(flags, again) {
			t.Errorf("DecodeUnhealthy(%q) = %v; written back as %q: %v, %v", value, flags, EncodeIndex(ids), again, err)
		}
	})
}
