package wireint

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
)

// TestParseOneSpellingPerInteger names the rule with the spellings real
// producers write and those they never do.
func TestParseOneSpellingPerInteger(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      string
		want   int64
		wantOK bool
	}{
		{name: "zero", s: "0", want: 0, wantOK: true},
		{name: "positive", s: "100", want: 100, wantOK: true},
		{name: "negative", s: "-1", want: -1, wantOK: true},
		{name: "largest int64", s: "9223372036854775807", want: math.MaxInt64, wantOK: true},
		{name: "smallest int64", s: "-9223372036854775808", want: math.MinInt64, wantOK: true},
		{name: "zero with a leading zero", s: "00"},
		{name: "zero with a plus", s: "+0"},
		{name: "negative zero", s: "-0"},
		{name: "leading zero", s: "010"},
		{name: "negative with a leading zero", s: "-01"},
		{name: "plus sign", s: "+5"},
		{name: "leading space", s: " 5"},
		{name: "trailing space", s: "5 "},
		{name: "fraction", s: "5.0"},
		{name: "exponent", s: "1e3"},
		{name: "hexadecimal", s: "0x10"},
		{name: "underscore", s: "1_000"},
		{name: "empty", s: ""},
		{name: "sign alone", s: "-"},
		{name: "beyond int64", s: "9223372036854775808"},
		{name: "non-ASCII digit", s: "１"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := Parse(tc.s, math.MinInt64, math.MaxInt64)
			if got != tc.want || ok != tc.wantOK {
				t.Errorf("Parse(%q) = %d, %v; want %d, %v", tc.s, got, ok, tc.want, tc.wantOK)
			}
		})
	}
}

func TestParseRange(t *testing.T) {
	for _, tc := range []struct {
		name   string
		s      string
		lo, hi int64
		wantOK bool
	}{
		{name: "low end", s: "-1", lo: -1, hi: 1024, wantOK: true},
		{name: "high end", s: "1024", lo: -1, hi: 1024, wantOK: true},
		{name: "below", s: "-2", lo: -1, hi: 1024},
		{name: "above", s: "1025", lo: -1, hi: 1024},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, ok := Parse(tc.s, tc.lo, tc.hi); ok != tc.wantOK {
				t.Errorf("Parse(%q, %d, %d) ok = %v, want %v", tc.s, tc.lo, tc.hi, ok, tc.wantOK)
			}
		})
	}
}

// TestParseDoesNotAllocate: decoders call Parse for every number of every
// card they read.
func TestParseDoesNotAllocate(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { Parse("-1234567", math.MinInt64, math.MaxInt64) }); n != 0 {
		t.Errorf("Parse allocates %v times per call", n)
	}
}

// TestIntJSON checks that a JSON integer field follows the same rule, with
// encoding/json's errors and its handling of null.
func TestIntJSON(t *testing.T) {
	type doc struct {
		N Int  `json:"n"`
		P *Int `json:"p"`
	}
	for _, tc := range []struct {
		name    string
		in      string
		want    doc
		wantErr string
	}{
		{name: "number", in: `{"n":12,"p":-1}`, want: doc{N: 12, P: ptr(-1)}},
		{name: "zero", in: `{"n":0,"p":0}`, want: doc{P: ptr(0)}},
		{name: "null", in: `{"n":null,"p":null}`},
		{name: "absent", in: `{}`},
		{name: "negative zero", in: `{"n":-0}`, wantErr: "json: cannot unmarshal number -0 into Go struct field doc.n of type int64"},
		{name: "fraction", in: `{"n":1.0}`, wantErr: "cannot unmarshal number 1.0 into Go struct field doc.n of type int64"},
		{name: "exponent", in: `{"p":1e3}`, wantErr: "cannot unmarshal number 1e3 into Go struct field doc.p of type int64"},
		{name: "beyond int64", in: `{"n":9223372036854775808}`, wantErr: "cannot unmarshal number 9223372036854775808"},
		{name: "quoted", in: `{"n":"12"}`, wantErr: "cannot unmarshal string into Go struct field doc.n of type int64"},
		{name: "bool", in: `{"n":true}`, wantErr: "cannot unmarshal bool"},
		{name: "list", in: `{"n":[1]}`, wantErr: "cannot unmarshal array"},
		{name: "object", in: `{"n":{}}`, wantErr: "cannot unmarshal object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got doc
			err := json.Unmarshal([]byte(tc.in), &got)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Unmarshal(%s) error = %v, want one containing %q", tc.in, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Unmarshal(%s): %v", tc.in, err)
			}
			if got.N != tc.want.N || (got.P == nil) != (tc.want.P == nil) || (got.P != nil && *got.P != *tc.want.P) {
				t.Errorf("Unmarshal(%s) = %+v, want %+v", tc.in, got, tc.want)
			}
			out, err := json.Marshal(got)
			if err != nil {
				t.Fatal(err)
			}
			var again doc
			if err := json.Unmarshal(out, &again); err != nil || again.N != got.N {
				t.Errorf("written back as %s: %+v, %v", out, again, err)
			}
		})
	}
}

// FuzzParse checks the rule against strconv: a string is accepted exactly
// when it is what strconv.FormatInt writes for the integer it spells, and
// Int reads the same strings as JSON.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"0", "00", "+0", "-0", "-1", "010", "9223372036854775807", "9223372036854775808", " 1", "1e3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := Parse(s, math.MinInt64, math.MaxInt64)
		v, err := strconv.ParseInt(s, 10, 64)
		if want := err == nil && strconv.FormatInt(v, 10) == s; ok != want || (ok && got != v) {
			t.Errorf("Parse(%q) = %d, %v; strconv reads %d, %v", s, got, ok, v, err)
		}
		// As JSON, s may have white space around it, which is not the
		// number's.
		lit := strings.Trim(s, " \t\r\n")
		lv, lok := Parse(lit, math.MinInt64, math.MaxInt64)
		var n Int
		jerr := json.Unmarshal([]byte(s), &n)
		if jok := jerr == nil && lit != "null"; jok != lok || int64(n) != lv {
			t.Errorf("Int read %q as %d, %v; Parse(%q): %d, %v", s, n, jerr, lit, lv, lok)
		}
	})
}

func ptr(v Int) *Int { return &v }
