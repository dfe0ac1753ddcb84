package vgpuproto

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestDecodeRegisterFieldCounts checks the three generations of the
// volcano.sh registration and the numa field's checks.
func TestDecodeRegisterFieldCounts(t *testing.T) {
	base := Card{UUID: "GPU-0", Count: 10, MemMiB: 16384, Cores: DefaultCores, Type: "NVIDIA-T4", Healthy: true, Mode: ModeHAMiCore}
	withNUMA := func(n int32) Card { c := base; c.NUMA = n; return c }
	for _, tc := range []struct {
		name, value string
		want        []Card
		wantErr     string
	}{
		{name: "five fields (volcano-vgpu-device-plugin)", value: "GPU-0,10,16384,NVIDIA-T4,true:", want: []Card{base}},
		{name: "six fields (with mode)", value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core:", want: []Card{base}},
		{name: "seven fields (with numa)", value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,3:", want: []Card{withNUMA(3)}},
		{name: "unknown numa", value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,-1:", want: []Card{withNUMA(-1)}},
		{name: "empty numa", value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,:", wantErr: `numa=""`},
		{name: "numa not a number", value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,one:", wantErr: `numa="one": want a whole number in [-1, 1024]`},
		{name: "numa out of range", value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,-2:", wantErr: `numa="-2"`},
		{name: "eight fields", value: "GPU-0,10,16384,NVIDIA-T4,true,hami-core,0,x:", wantErr: "want UUID,count,devmemMiB,type,health[,mode[,numa]]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeRegister(tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), AnnotationRegister) {
					t.Fatalf("DecodeRegister(%q) error = %v, want one naming %s and %q", tc.value, err, AnnotationRegister, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if again, _ := DecodeRegister(EncodeRegister(got)); !cmp.Equal(got, again) {
				t.Errorf("round trip: %v, want %v", again, got)
			}
		})
	}
}

// TestEncodeScoresRoundTrip checks that the scores written decode to the
// matrix they came from.
func TestEncodeScoresRoundTrip(t *testing.T) {
	uuids := []string{"GPU-a", "GPU-b", "GPU-c"}
	m := []int32{0, 1250, 10, 1250, 0, 10, 10, 10, 0}
	s, err := EncodeScores(uuids, m)
	if err != nil {
		t.Fatal(err)
	}
	const want = `[{"uuid":"GPU-a","score":{"GPU-b":1250,"GPU-c":10}},{"uuid":"GPU-b","score":{"GPU-a":1250,"GPU-c":10}},{"uuid":"GPU-c","score":{"GPU-a":10,"GPU-b":10}}]`
	if s != want {
		t.Errorf("EncodeScores =\n%s, want\n%s", s, want)
	}
	got, err := DecodeScores(s, uuids)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(m, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	if _, err := EncodeScores(uuids, m[:4]); err == nil || !strings.Contains(err.Error(), AnnotationHAMiScore) {
		t.Errorf("short matrix: error %v, want one naming %s", err, AnnotationHAMiScore)
	}
}

func TestRegisteredWithNUMA(t *testing.T) {
	for value, want := range map[string]bool{
		"GPU-a,10,16384,NVIDIA-T4,true,hami-core,0:GPU-b,10,16384,NVIDIA-T4,true,hami-core,-1:": true,
		"GPU-a,10,16384,NVIDIA-T4,true,hami-core:":                                              false,
		"GPU-a,10,16384,NVIDIA-T4,true:":                                                        false,
		"GPU-a,10,16384,NVIDIA-T4,true,hami-core,0:GPU-b,10,16384,NVIDIA-T4,true:":              false,
		"": false,
	} {
		if got := RegisteredWithNUMA(value); got != want {
			t.Errorf("RegisteredWithNUMA(%q) = %v, want %v", value, got, want)
		}
	}
}
