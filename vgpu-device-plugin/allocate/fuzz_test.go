package allocate

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzDecode checks the node agent's reader of volcano.sh/vgpu-ids-new: a
// refusal names the container entry, an accepted value keeps every card
// within the documented limits, its size is proportional to the input,
// Encode writes it back to a value that decodes the same, and consume
// removes exactly the NVIDIA cards of one entry.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		"",
		";",
		"GPU-0,NVIDIA,1000,10:",
		"GPU-0,NVIDIA,1000,10:GPU-1,NVIDIA,2000,0:;",
		"GPU-0,NVIDIA,1000,10;GPU-other,NVIDIA,400,0:",
		";GPU-0,NVIDIA,1000,10:;",
		"GPU-0[3g.20gb-1],NVIDIA,20000,0:",
		"GPU-0[3g.20gb-64],NVIDIA,20000,0:",
		"GPU-0[-1],NVIDIA,1,1:",
		"GPU-0[g-1,NVIDIA,1,1:",
		",NVIDIA,1,1:",
		"GPU-0,NVIDIA,-1,10:",
		"GPU-0,NVIDIA,1099511627777,10:",
		"GPU-0,NVIDIA,1,100001:",
		"GPU-0,NVIDIA,1000:",
		"NPU-0,Ascend910B,16384,100:;GPU-forged,NVIDIA,1000,10:",
		"GPU-0,NVIDIA,+5,010:",
		strings.Repeat("G,NVIDIA,1,1:", 257),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := Decode(value)
		if err != nil {
			if got != nil {
				t.Errorf("Decode(%q) returned %v with the error %v", value, got, err)
			}
			if !strings.HasPrefix(err.Error(), "container entry ") {
				t.Errorf("Decode(%q) error %q does not name the container entry", value, err)
			}
			return
		}
		if value == "" {
			if got != nil {
				t.Fatalf("Decode(\"\") = %v, want nil", got)
			}
			return
		}
		if want := strings.Count(value, ";") + 1; len(got) != want {
			t.Fatalf("Decode(%q) has %d entries, want %d", value, len(got), want)
		}
		for i, c := range got {
			if len(c) > maxCardsPerContainer {
				t.Errorf("entry %d has %d cards, more than %d", i, len(c), maxCardsPerContainer)
			}
			for _, d := range c {
				if d.UUID == "" || d.Mem < 0 || d.Mem > maxMemory || d.Cores < 0 || d.Cores > maxCores || d.MIGPos < -1 || d.MIGPos >= 64 {
					t.Errorf("entry %d: accepted card %+v outside the limits", i, d)
				}
			}
		}
		enc := Encode(got)
		if len(enc) > 2*len(value)+1 {
			t.Errorf("Encode(Decode(%d bytes)) is %d bytes", len(value), len(enc))
		}
		again, err := Decode(enc)
		if err != nil {
			t.Fatalf("Decode(Encode(Decode(%q))) = %q: %v", value, enc, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Errorf("round trip of %q via %q (-decoded +re-decoded):\n%s", value, enc, diff)
		}
		checkConsume(t, got)
	})
}

// checkConsume checks that consume drops the NVIDIA cards of the entry
// nextPending names and leaves everything else as it was.
func checkConsume(t *testing.T, got [][]Device) {
	t.Helper()
	i := nextPending(got)
	if i < 0 {
		return
	}
	after, err := Decode(consume(got, i))
	if err != nil {
		t.Fatalf("Decode(consume(entry %d)): %v", i, err)
	}
	if after == nil {
		// "" is also what one container with nothing left encodes to.
		after = make([][]Device, len(got))
	}
	if len(after) != len(got) {
		t.Fatalf("consume changed the entry count from %d to %d", len(got), len(after))
	}
	for j := range got {
		var want []Device
		for _, d := range got[j] {
			if j != i || d.Type != DeviceType {
				want = append(want, d)
			}
		}
		if diff := cmp.Diff(want, after[j]); diff != "" {
			t.Errorf("consume(entry %d): entry %d (-want +got):\n%s", i, j, diff)
		}
	}
}
