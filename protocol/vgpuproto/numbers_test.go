package vgpuproto

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestNumbersHaveOneSpelling names the rule every number of both dialects
// is read by (protocol/internal/wireint): only as strconv.FormatInt writes
// it. So devcore 0 means a whole card in the comma form and in JSON alike,
// and 00, +0 and -0, which strconv.ParseInt would read as 0, are refused
// in both, as are leading zeros and "+" anywhere.
func TestNumbersHaveOneSpelling(t *testing.T) {
	hamiComma := func(cores string) string { return "GPU-0,10,16384," + cores + ",NVIDIA-T4,0,true:" }
	hamiJSON := func(cores string) string {
		return `[{"id":"GPU-0","count":10,"devmem":16384,"devcore":` + cores + `,"type":"NVIDIA-T4","health":true}]`
	}
	whole := []Card{{UUID: "GPU-0", Count: 10, MemMiB: 16384, Cores: DefaultCores, Type: "NVIDIA-T4", Healthy: true, Mode: ModeHAMiCore}}
	half := []Card{whole[0]}
	half[0].Cores = 50
	for _, tc := range []struct {
		name    string
		decode  func(string) ([]Card, error)
		value   string
		want    []Card
		wantErr string
	}{
		{name: "HAMi comma devcore 0 is a whole card", decode: DecodeHAMiRegister, value: hamiComma("0"), want: whole},
		{name: "HAMi JSON devcore 0 is a whole card", decode: DecodeHAMiRegister, value: hamiJSON("0"), want: whole},
		{name: "HAMi comma devcore 50", decode: DecodeHAMiRegister, value: hamiComma("50"), want: half},
		{name: "HAMi JSON devcore 50", decode: DecodeHAMiRegister, value: hamiJSON("50"), want: half},
		{name: "HAMi comma devcore 00", decode: DecodeHAMiRegister, value: hamiComma("00"), wantErr: `devcore="00"`},
		{name: "HAMi comma devcore +0", decode: DecodeHAMiRegister, value: hamiComma("+0"), wantErr: `devcore="+0"`},
		{name: "HAMi comma devcore -0", decode: DecodeHAMiRegister, value: hamiComma("-0"), wantErr: `devcore="-0"`},
		{name: "HAMi comma devcore 050", decode: DecodeHAMiRegister, value: hamiComma("050"), wantErr: `devcore="050"`},
		{name: "HAMi JSON devcore -0", decode: DecodeHAMiRegister, value: hamiJSON("-0"),
			wantErr: "cannot unmarshal number -0 into Go struct field hamiDevice.devcore of type int64"},
		{name: "HAMi JSON devcore 50.0", decode: DecodeHAMiRegister, value: hamiJSON("50.0"), wantErr: "cannot unmarshal number 50.0"},
		{name: "HAMi JSON devcore as a string", decode: DecodeHAMiRegister, value: hamiJSON(`"50"`), wantErr: "cannot unmarshal string"},
		{name: "HAMi JSON count -0", decode: DecodeHAMiRegister,
			value: `[{"id":"GPU-0","count":-0,"devmem":16384,"health":true}]`, wantErr: "cannot unmarshal number -0"},
		{name: "HAMi comma numa -0", decode: DecodeHAMiRegister, value: "GPU-0,10,16384,0,NVIDIA-T4,-0,true:", wantErr: `numa="-0"`},
		{name: "count with a leading zero", decode: DecodeRegister, value: "GPU-0,010,16384,NVIDIA-T4,true:", wantErr: `count="010"`},
		{name: "devmem with a plus", decode: DecodeRegister, value: "GPU-0,10,+16384,NVIDIA-T4,true:", wantErr: `devmem="+16384"`},
		{name: "numa 00", decode: DecodeRegister, value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,00:", wantErr: `numa="00"`},
		{name: "numa -01", decode: DecodeRegister, value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,-01:", wantErr: `numa="-01"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.decode(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("decode(%q) = %v, %v; want an error containing %q", tc.value, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("decode(%q): %v", tc.value, err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decode(%q) (-want +got):\n%s", tc.value, diff)
			}
		})
	}
}

// TestAllocationNumbersHaveOneSpelling: the same rule in the allocation,
// whose accepted numbers EncodeAllocation writes back byte for byte.
func TestAllocationNumbersHaveOneSpelling(t *testing.T) {
	for _, tc := range []struct {
		name, value, wantErr string
	}{
		{name: "zeros", value: "GPU-0,NVIDIA,0,0:"},
		{name: "MIG position 0", value: "GPU-0[3g.20gb-0],NVIDIA,20000,0:"},
		{name: "memory with a plus", value: "GPU-0,NVIDIA,+5,10:", wantErr: `memory "+5"`},
		{name: "memory 00", value: "GPU-0,NVIDIA,00,10:", wantErr: `memory "00"`},
		{name: "cores with a leading zero", value: "GPU-0,NVIDIA,5,010:", wantErr: `cores "010"`},
		{name: "cores -0", value: "GPU-0,NVIDIA,5,-0:", wantErr: `cores "-0"`},
		{name: "MIG position 01", value: "GPU-0[3g.20gb-01],NVIDIA,20000,0:", wantErr: `position "01"`},
		{name: "MIG position +1", value: "GPU-0[3g.20gb-+1],NVIDIA,20000,0:", wantErr: `position "+1"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeAllocation(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("DecodeAllocation(%q) = %v, %v; want an error containing %q", tc.value, got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("DecodeAllocation(%q): %v", tc.value, err)
			}
			if enc := EncodeAllocation(got); enc != tc.value {
				t.Errorf("EncodeAllocation(DecodeAllocation(%q)) = %q, want the value itself", tc.value, enc)
			}
		})
	}
}

// TestScoresNumbersHaveOneSpelling: link scores are JSON integers by the
// same rule.
func TestScoresNumbersHaveOneSpelling(t *testing.T) {
	uuids := []string{"GPU-0", "GPU-1"}
	for _, s := range []string{"-0", "10.0", "1e1", `"10"`} {
		value := `[{"uuid":"GPU-0","score":{"GPU-1":` + s + `}}]`
		if got, err := DecodeScores(value, uuids); err == nil || !strings.Contains(err.Error(), AnnotationHAMiScore) {
			t.Errorf("DecodeScores(%s) = %v, %v; want an error naming %s", value, got, err, AnnotationHAMiScore)
		}
	}
}
