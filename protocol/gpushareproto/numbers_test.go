package gpushareproto

import (
	"strings"
	"testing"
)

// TestIndexHasOneSpelling names the rule card indices are read by
// (protocol/internal/wireint, as for every number of the protocols): only
// as strconv.Itoa writes them, so "0" is card 0 and "00", "+0", "-0" and
// "01" name no card, in the index and in the unhealthy list alike.
func TestIndexHasOneSpelling(t *testing.T) {
	for _, tc := range []struct {
		value  string
		wantOK bool
	}{
		{"0", true}, {"1", true}, {"00", false}, {"+0", false}, {"-0", false}, {"01", false}, {"+1", false}, {" 1", false},
	} {
		ids, err := DecodeIndex(tc.value, 1, 4)
		if (err == nil) != tc.wantOK || (err != nil && !strings.Contains(err.Error(), "is not a card index")) {
			t.Errorf("DecodeIndex(%q) = %v, %v; want ok %v", tc.value, ids, err, tc.wantOK)
		}
		if err == nil && EncodeIndex(ids) != tc.value {
			t.Errorf("EncodeIndex(DecodeIndex(%q)) = %q", tc.value, EncodeIndex(ids))
		}
		// The unhealthy list trims spaces around entries, as upstream does.
		flags, err := DecodeUnhealthy(tc.value, 4)
		if wantOK := tc.wantOK || tc.value == " 1"; (err == nil) != wantOK {
			t.Errorf("DecodeUnhealthy(%q) = %v, %v; want ok %v", tc.value, flags, err, wantOK)
		}
	}
}
