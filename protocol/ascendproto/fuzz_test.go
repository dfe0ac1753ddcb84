package ascendproto

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecodeRegister feeds a fuzzed hami.io/node-register-<commonWord>. A
// refusal returns no cards; an accepted registration has one card per
// entry, at most MaxCards, each ID once and within the limits, and
// EncodeRegister writes it back to a value that decodes the same.
func FuzzDecodeRegister(f *testing.F) {
	for _, s := range []string{
		"",
		"[]",
		`[{"id":"NPU-0","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true}]`,
		`[{"id":"NPU-0","count":7,"devmem":65536,"devcore":20,"type":"Ascend910B3","health":true,"custominfo":{"NetworkID":3}},{"id":"NPU-1","devmem":65536,"type":"Ascend910B3"}]`,
		`[{"id":"NPU-0","devmem":65536},{"id":"NPU-0","devmem":65536}]`,
		`[{"id":"NPU 0","devmem":1}]`,
		`[{"id":"NPU-0","count":-1,"devmem":1}]`,
		`[{"id":"NPU-0","devmem":0}]`,
		`[{"id":"NPU-0","devmem":1073741825}]`,
		`[{"id":"NPU-0","devmem":1,"numa":-2}]`,
		`[{"id":"NPU-0","devmem":1,"index":-1}]`,
		`[{"id":"NPU-0","devmem":1,"custominfo":{"NetworkID":1.5}}]`,
		`[{"id":"NPU-0","devmem":1,"custominfo":{"NetworkID":"x"}}]`,
		`{"id":"NPU-0"}`,
		`[{"id":"NPU-0","devmem":1e3}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		cards, err := DecodeRegister(value)
		if err != nil {
			if cards != nil {
				t.Errorf("DecodeRegister returned %v with the error %v", cards, err)
			}
			return
		}
		if cards == nil {
			if strings.TrimSpace(value) != "" {
				t.Fatalf("DecodeRegister(%q) = nil, nil; only an empty value registers nothing", value)
			}
			return
		}
		var entries []json.RawMessage
		if err := json.Unmarshal([]byte(value), &entries); err != nil {
			t.Fatalf("DecodeRegister accepted %q, which is not a JSON list: %v", value, err)
		}
		if len(cards) != len(entries) || len(cards) > MaxCards {
			t.Fatalf("DecodeRegister: %d cards from %d entries (at most %d)", len(cards), len(entries), MaxCards)
		}
		ids := map[string]bool{}
		for _, c := range cards {
			if ids[c.ID] || c.ID == "" || strings.ContainsAny(c.ID, ",:; ") {
				t.Errorf("card %q: duplicate or malformed ID accepted", c.ID)
			}
			ids[c.ID] = true
			if c.DevmemMiB <= 0 || c.DevmemMiB > MaxMemoryMiB || c.Count < 0 || c.Count > MaxCount || c.Devcore < 0 ||
				c.Devcore > MaxDevcore || c.NUMA < -1 || c.NUMA > MaxNUMA || c.Index < 0 {
				t.Errorf("card %+v outside the limits", c)
			}
		}
		enc, err := EncodeRegister(cards)
		if err != nil {
			t.Fatalf("EncodeRegister(DecodeRegister(%q)): %v", value, err)
		}
		again, err := DecodeRegister(enc)
		if err != nil {
			t.Fatalf("DecodeRegister(%s), written back from %q: %v", enc, value, err)
		}
		if diff := cmp.Diff(cards, again); diff != "" {
			t.Errorf("round trip of %q via %s (-decoded +re-decoded):\n%s", value, enc, diff)
		}
	})
}

// FuzzDecodeAssignments checks the reader of
// hami.io/<commonWord>-devices-to-allocate: a refusal names the container
// or the empty value, an accepted value keeps every card within the limits
// and EncodeAssignments writes it back byte for byte (up to the optional
// last ";": every number has one spelling).
func FuzzDecodeAssignments(f *testing.F) {
	for _, s := range []string{
		"NPU-0,Ascend910B3,16384,0:;",
		"NPU-0,Ascend910B3,65536,0:NPU-1,Ascend910B3,65536,0:;;",
		";NPU-0,Ascend910B3,10000,30:",
		";",
		"",
		"NPU-0,Ascend910B3,16384,0;",
		",Ascend910B3,1,1:;",
		"NPU-0,Ascend910B3,-1,0:;",
		"NPU-0,Ascend910B3,1,2147483648:;",
		"NPU-0,Ascend910B3,1,0:NPU-0,Ascend910B3,1,0:;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := DecodeAssignments(value)
		if err != nil {
			if got != nil {
				t.Errorf("DecodeAssignments returned %v with the error %v", got, err)
			}
			if !strings.HasPrefix(err.Error(), "container ") && !strings.HasPrefix(err.Error(), "empty value") {
				t.Errorf("DecodeAssignments(%q) error %q does not name the container", value, err)
			}
			return
		}
		if want := strings.Count(strings.TrimSuffix(value, ";"), ";") + 1; len(got) != want {
			t.Fatalf("DecodeAssignments(%q) has %d containers, want %d", value, len(got), want)
		}
		for _, cards := range got {
			seen := map[string]bool{}
			for _, c := range cards {
				if c.UUID == "" || c.Type == "" || c.MemMiB <= 0 || c.MemMiB > MaxMemoryMiB || c.Cores < 0 || c.Cores > FullCores ||
					seen[c.UUID] {
					t.Errorf("accepted card %+v", c)
				}
				seen[c.UUID] = true
			}
		}
		enc := EncodeAssignments(got)
		if want := strings.TrimSuffix(value, ";") + ";"; enc != want {
			t.Errorf("EncodeAssignments(DecodeAssignments(%q)) = %q, want %q", value, enc, want)
		}
		again, err := DecodeAssignments(enc)
		if err != nil {
			t.Fatalf("DecodeAssignments(%q), written back from %q: %v", enc, value, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Errorf("round trip of %q via %q (-decoded +re-decoded):\n%s", value, enc, diff)
		}
	})
}

// FuzzDecodeRuntimeInfo checks the reader of huawei.com/<commonWord>: a
// refusal says what is wanted, and an accepted list EncodeRuntimeInfo
// writes back decodes the same.
func FuzzDecodeRuntimeInfo(f *testing.F) {
	for _, s := range []string{
		`[{"UUID":"NPU-0","temp":"vir05_1c_16g"}]`,
		`[{"UUID":"NPU-0"},{"UUID":"NPU-1"}]`,
		`[{"UUID":"NPU-0","memory":10000,"core":30}]`,
		`[]`,
		`null`,
		``,
		`{"UUID":"NPU-0"}`,
		`[{"UUID":"NPU-0","memory":"1"}]`,
		`[{"UUID":"NPU-0","core":2147483648}]`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := DecodeRuntimeInfo(value)
		if err != nil {
			if got != nil || !strings.HasPrefix(err.Error(), "want a JSON list") {
				t.Errorf("DecodeRuntimeInfo(%q) = %v, %v", value, got, err)
			}
			return
		}
		enc := EncodeRuntimeInfo(got)
		again, err := DecodeRuntimeInfo(enc)
		if err != nil {
			t.Fatalf("DecodeRuntimeInfo(%s), written back from %q: %v", enc, value, err)
		}
		if diff := cmp.Diff(got, again, cmpEmptyRuntime); diff != "" {
			t.Errorf("round trip of %q via %s (-decoded +re-decoded):\n%s", value, enc, diff)
		}
	})
}

// cmpEmptyRuntime treats a nil and an empty list alike: "null" and "[]"
// both mean no entries.
var cmpEmptyRuntime = cmp.Comparer(func(a, b []RuntimeEntry) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	return cmp.Equal(a, b)
})
