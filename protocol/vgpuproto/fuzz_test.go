package vgpuproto

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// FuzzDecodeAllocation checks the reader of volcano.sh/vgpu-ids-new: a
// refusal names the container entry, an accepted value keeps every card
// within the documented limits, EncodeAllocation writes it back byte for
// byte (up to the optional ":" after an entry's last card: every number has
// one spelling), and Consume removes exactly the NVIDIA cards of one entry.
func FuzzDecodeAllocation(f *testing.F) {
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
		"GPU-0,NVIDIA,1000,10:GPU-0,NVIDIA,1000,10:",
		"NPU-0,Ascend910B,16384,100:;GPU-forged,NVIDIA,1000,10:",
		"GPU-0,NVIDIA,+5,010:",
		strings.Repeat("G,NVIDIA,1,1:", 257),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := DecodeAllocation(value)
		if err != nil {
			if got != nil {
				t.Errorf("DecodeAllocation(%q) returned %v with the error %v", value, got, err)
			}
			if !strings.HasPrefix(err.Error(), "container entry ") {
				t.Errorf("DecodeAllocation(%q) error %q does not name the container entry", value, err)
			}
			return
		}
		if value == "" {
			if got != nil {
				t.Fatalf("DecodeAllocation(\"\") = %v, want nil", got)
			}
			return
		}
		if want := strings.Count(value, ";") + 1; len(got) != want {
			t.Fatalf("DecodeAllocation(%q) has %d entries, want %d", value, len(got), want)
		}
		for i, c := range got {
			checkEntry(t, i, c)
		}
		enc := EncodeAllocation(got)
		if want := withLastColons(value); enc != want {
			t.Errorf("EncodeAllocation(DecodeAllocation(%q)) = %q, want %q", value, enc, want)
		}
		again, err := DecodeAllocation(enc)
		if err != nil {
			t.Fatalf("DecodeAllocation(EncodeAllocation(DecodeAllocation(%q))) = %q: %v", value, enc, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Errorf("round trip of %q via %q (-decoded +re-decoded):\n%s", value, enc, diff)
		}
		checkConsume(t, got)
	})
}

// withLastColons is an allocation value with the ":" that EncodeAllocation
// writes after the last card of every non-empty entry.
func withLastColons(value string) string {
	entries := strings.Split(value, ";")
	for i, e := range entries {
		if e != "" && !strings.HasSuffix(e, ":") {
			entries[i] = e + ":"
		}
	}
	return strings.Join(entries, ";")
}

// checkEntry checks one decoded container entry against the limits.
func checkEntry(t *testing.T, i int, c []Device) {
	t.Helper()
	if len(c) > MaxCardsPerContainer {
		t.Errorf("entry %d has %d cards, more than %d", i, len(c), MaxCardsPerContainer)
	}
	seen := map[string]bool{}
	for _, d := range c {
		if !validID(d.UUID) || d.Type == "" || d.Mem < 0 || d.Mem > MaxMemoryMiB || d.Cores < 0 || d.Cores > MaxCores ||
			d.MIGPos < -1 || d.MIGPos >= MaxMIGPositions || seen[d.UUID] {
			t.Errorf("entry %d: accepted card %+v outside the limits or twice", i, d)
		}
		seen[d.UUID] = true
	}
}

// checkConsume checks that Consume drops the NVIDIA cards of the entry
// NextPending names and leaves everything else as it was.
func checkConsume(t *testing.T, got [][]Device) {
	t.Helper()
	i := NextPending(got)
	if i < 0 {
		return
	}
	after, err := DecodeAllocation(Consume(got, i))
	if err != nil {
		t.Fatalf("DecodeAllocation(Consume(entry %d)): %v", i, err)
	}
	if after == nil {
		// "" is also what one container with nothing left encodes to.
		after = make([][]Device, len(got))
	}
	if len(after) != len(got) {
		t.Fatalf("Consume changed the entry count from %d to %d", len(got), len(after))
	}
	for j := range got {
		var want []Device
		for _, d := range got[j] {
			if j != i || d.Type != DeviceTypeNVIDIA {
				want = append(want, d)
			}
		}
		if diff := cmp.Diff(want, after[j]); diff != "" {
			t.Errorf("Consume(entry %d): entry %d (-want +got):\n%s", i, j, diff)
		}
	}
}

// FuzzDecodeRegister feeds a fuzzed volcano.sh/node-vgpu-register (hami
// false) or hami.io/node-nvidia-register (hami true, JSON or the older comma
// form) and a fuzzed hami.io/node-nvidia-score. A refusal names the
// registration annotation; an accepted registration has at most MaxCards
// unique cards within the limits, link scores form an n x n matrix of
// values in [0, MaxLinkScore] with a zero diagonal, and the cards written
// back in the same format decode the same.
func FuzzDecodeRegister(f *testing.F) {
	score := `[{"uuid":"GPU-0","score":{"GPU-1":100}},{"uuid":"GPU-1","score":{"GPU-0":100,"GPU-9":5}}]`
	two := EncodeRegister([]Card{testCard("GPU-0"), testCard("GPU-1")})
	mig := testCard("GPU-m")
	mig.Type, mig.Count, mig.MemMiB, mig.Mode = "NVIDIA-A100-SXM4-40GB", 7, 40960, ModeMIG
	for _, s := range []struct {
		value string
		hami  bool
		score string
	}{
		{two, false, score},
		{EncodeRegister([]Card{mig}), false, ""},
		{"GPU-0,10,16384,NVIDIA-Tesla V100-PCIE-32GB,true:", false, ""},
		{"GPU-0,10,16384,NVIDIA,false,mps:GPU-0,10,16384,NVIDIA,true:", false, ""},
		{"GPU-0,10,0,NVIDIA,true:", false, ""},
		{"GPU-0,-1,16384,NVIDIA,true:", false, ""},
		{"GPU-0,10,16384,NVIDIA,maybe:", false, ""},
		{"GPU 0,10,16384,NVIDIA,true:", false, ""},
		{"GPU-0,10,16384,NVIDIA,true,x:", false, ""},
		{"GPU-0,10,16384,NVIDIA,true,hami-core,3:GPU-1,10,16384,NVIDIA,true,hami-core,-1:", false, score},
		{"GPU-0,10,16384,NVIDIA,true,hami-core,:", false, ""},
		{"GPU-0,10,16384,NVIDIA,true,hami-core,1025:", false, ""},
		{"GPU-0,10,16384,NVIDIA,true,hami-core,0,x:", false, ""},
		{"::", false, ""},
		{"", false, ""},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-Tesla T4","numa":0,"health":true,"mode":"hami-core"}]`, true, score},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"type":"NVIDIA","health":true},{"id":"GPU-1","count":10,"devmem":16384,"type":"NVIDIA","health":true}]`, true, score},
		{`[{"id":"GPU-0","count":10,"devmem":16384}]`, true, ""},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"health":true,"numa":2000}]`, true, ""},
		{`[{"id":"GPU-0","count":10,"devmem":16384,"health":true,"devcore":-1}]`, true, ""},
		{"GPU-0,10,16384,100,NVIDIA-Tesla T4,0,true:GPU-1,10,16384,100,NVIDIA-Tesla T4,0,true,1,hami-core:", true, score},
		{"GPU-0,10,16384,100,NVIDIA,0:", true, ""},
		{two, false, `[{"uuid":"GPU-0","score":{"GPU-1":-1}}]`},
		{two, false, `{`},
	} {
		f.Add(s.value, s.hami, s.score)
	}
	f.Fuzz(func(t *testing.T, value string, hami bool, score string) {
		// Annotations travel as JSON strings: the API server cannot hand
		// us invalid UTF-8 (and JSON could not carry it back).
		if !utf8.ValidString(value) || !utf8.ValidString(score) {
			return
		}
		decode, key := DecodeRegister, AnnotationRegister
		if hami {
			decode, key = DecodeHAMiRegister, AnnotationHAMiRegister
		}
		cards, err := decode(value)
		if err != nil {
			if cards != nil || !strings.Contains(err.Error(), key) {
				t.Errorf("decode(%q) = %v, %v; want no cards and an error naming %s", value, cards, err, key)
			}
			return
		}
		if cards == nil {
			return
		}
		checkDecoded(t, cards)
		if score != "" {
			checkLinks(t, cards, score)
		}
		again, err := reencode(cards, hami)
		if err != nil {
			t.Fatalf("decode the registration written back: %v", err)
		}
		if diff := cmp.Diff(cards, again); diff != "" {
			t.Errorf("round trip of %q (-decoded +re-decoded):\n%s", value, diff)
		}
	})
}

func checkDecoded(t *testing.T, cards []Card) {
	t.Helper()
	if len(cards) > MaxCards {
		t.Fatalf("%d cards, want at most %d", len(cards), MaxCards)
	}
	ids := map[string]bool{}
	for _, c := range cards {
		if ids[c.UUID] || !validID(c.UUID) {
			t.Errorf("card %q: duplicate or malformed UUID accepted", c.UUID)
		}
		ids[c.UUID] = true
		if c.MemMiB <= 0 || c.MemMiB > MaxMemoryMiB || c.Count < 0 || c.Count > MaxShareCount || c.Cores < 0 || c.Cores > MaxCores ||
			c.NUMA < -1 || c.NUMA > MaxNUMA || (c.Mode != ModeHAMiCore && c.Mode != ModeMIG && c.Mode != ModeMPS) {
			t.Errorf("card %+v outside the limits", c)
		}
	}
}

func checkLinks(t *testing.T, cards []Card, score string) {
	t.Helper()
	uuids := make([]string, len(cards))
	for i, c := range cards {
		uuids[i] = c.UUID
	}
	links, err := DecodeScores(score, uuids)
	if err != nil {
		if links != nil || !strings.Contains(err.Error(), AnnotationHAMiScore) {
			t.Errorf("DecodeScores(%q) = %v, %v; want no scores and an error naming %s", score, links, err, AnnotationHAMiScore)
		}
		return
	}
	n := len(cards)
	if len(links) != n*n {
		t.Fatalf("%d link scores for %d cards", len(links), n)
	}
	for i, s := range links {
		if s < 0 || s > MaxLinkScore || (i/n == i%n && s != 0) {
			t.Errorf("link score %d->%d = %d", i/n, i%n, s)
		}
	}
}

// reencode writes the cards back in the format they came in and decodes
// them again.
func reencode(cards []Card, hami bool) ([]Card, error) {
	if !hami {
		return DecodeRegister(EncodeRegister(cards))
	}
	devs := make([]hamiDevice, 0, len(cards))
	for _, c := range cards {
		count, mem := wireint.Int(c.Count), wireint.Int(c.MemMiB)
		devs = append(devs, hamiDevice{ID: c.UUID, Count: &count, Devmem: &mem, Devcore: wireint.Int(c.Cores),
			Type: c.Type, Numa: wireint.Int(c.NUMA), Mode: c.Mode, Health: c.Healthy})
	}
	raw, err := json.Marshal(devs)
	if err != nil {
		return nil, err
	}
	return DecodeHAMiRegister(string(raw))
}

// testCard is a healthy 16 GiB hami-core card.
func testCard(uuid string) Card {
	return Card{UUID: uuid, Count: 10, MemMiB: 16384, Cores: DefaultCores, Type: "NVIDIA-Tesla V100-PCIE-32GB", Healthy: true,
		Mode: ModeHAMiCore}
}
