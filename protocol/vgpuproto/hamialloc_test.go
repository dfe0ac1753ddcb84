package vgpuproto

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestEncodeHAMiAllocation(t *testing.T) {
	a := Device{UUID: "GPU-a", MIGPos: -1, Type: DeviceTypeNVIDIA, Mem: 3000, Cores: 30}
	b := Device{UUID: "GPU-b", MIGPos: -1, Type: DeviceTypeNVIDIA, Mem: 1000, Cores: 0}
	tests := []struct {
		name           string
		initContainers int
		containers     [][]Device
		want           string
	}{
		// Project-HAMi/HAMi pkg/device/devices.go EncodePodSingleDevice:
		// every container entry, the last one too, ends with ";".
		{name: "one container", containers: [][]Device{{a}}, want: "GPU-a,NVIDIA,3000,30:;"},
		{name: "two cards, second container empty", containers: [][]Device{{a, b}, nil}, want: "GPU-a,NVIDIA,3000,30:GPU-b,NVIDIA,1000,0:;;"},
		{name: "init containers first", initContainers: 2, containers: [][]Device{nil, {b}}, want: ";;;GPU-b,NVIDIA,1000,0:;"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := EncodeHAMiAllocation(tc.initContainers, tc.containers)
			if got != tc.want {
				t.Fatalf("EncodeHAMiAllocation = %q, want %q", got, tc.want)
			}
			back, err := DecodeHAMiAllocation(AnnotationHAMiAllocated, got)
			if err != nil {
				t.Fatal(err)
			}
			want := append(make([][]Device, tc.initContainers), tc.containers...)
			if diff := cmp.Diff(want, back); diff != "" {
				t.Errorf("decoded back (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeHAMiAllocation(t *testing.T) {
	tests := []struct {
		name, value string
		cards       int
		holds       bool
		wantErr     string
	}{
		{name: "consumed by the plugin", value: ";", holds: false},
		{name: "consumed, init layout", value: ";;;", holds: false},
		{name: "pending", value: "GPU-a,NVIDIA,1,1:;", cards: 1, holds: true},
		{name: "other vendor only", value: "MLU-0,MLU,1,1:;", cards: 1, holds: false},
		{name: "no trailing separator", value: "GPU-a,NVIDIA,1,1:", cards: 1, holds: true},
		{name: "bad cores", value: "GPU-a,NVIDIA,1,x:;", wantErr: `container entry 0 card "GPU-a,NVIDIA,1,x": cores "x"`},
		{name: "missing field", value: ";GPU-a,NVIDIA,1:;", wantErr: "container entry 1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := DecodeHAMiAllocation(AnnotationHAMiToAllocate, tc.value)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), AnnotationHAMiToAllocate) {
					t.Fatalf("error %v, want one naming %s and containing %q", err, AnnotationHAMiToAllocate, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for _, c := range got {
				n += len(c)
			}
			if n != tc.cards || HAMiAllocationHolds(got) != tc.holds {
				t.Errorf("%q: %d cards, holds %v; want %d, %v", tc.value, n, HAMiAllocationHolds(got), tc.cards, tc.holds)
			}
		})
	}
}

func TestDecodeHAMiRegisterOmittedFields(t *testing.T) {
	// HAMi marshals DeviceInfo with omitempty: an unhealthy card, index 0
	// and NUMA node 0 leave their fields out.
	cards, err := DecodeHAMiRegister(`[{"id":"GPU-0","count":10,"devmem":16384,"devcore":100,"type":"NVIDIA-T4","mode":"hami-core"},` +
		`{"id":"GPU-1","index":1,"count":10,"devmem":16384,"type":"NVIDIA-T4","numa":1,"health":true}]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Card{
		{UUID: "GPU-0", Count: 10, MemMiB: 16384, Cores: 100, Type: "NVIDIA-T4", Mode: ModeHAMiCore},
		{UUID: "GPU-1", Count: 10, MemMiB: 16384, Cores: 100, Type: "NVIDIA-T4", NUMA: 1, Healthy: true, Mode: ModeHAMiCore},
	}
	if diff := cmp.Diff(want, cards); diff != "" {
		t.Errorf("cards (-want +got):\n%s", diff)
	}
}

// FuzzDecodeHAMiAllocation checks the reader of hami.io/vgpu-devices-*: a
// refusal names the annotation and the container entry, an accepted value
// keeps every card within the limits, and EncodeHAMiAllocation writes it
// back byte for byte (up to the optional ":" and ";" after an entry's last
// card and the last entry: every number has one spelling).
func FuzzDecodeHAMiAllocation(f *testing.F) {
	for _, s := range []string{
		"", ";", ";;;",
		"GPU-0,NVIDIA,1000,10:;",
		";;GPU-0,NVIDIA,1000,10:GPU-1,NVIDIA,2000,0:;",
		"MLU-0,MLU,100,0:GPU-0,NVIDIA,4000,30:;",
		"GPU-0,NVIDIA,1000,10:",
		"GPU-0,NVIDIA,1000:;",
		"GPU-0,NVIDIA,-1,10:;",
		"GPU-0,NVIDIA,1,1:GPU-0,NVIDIA,1,1:;",
		"GPU-0[1-2],NVIDIA,1,1:;",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, value string) {
		got, err := DecodeHAMiAllocation(AnnotationHAMiAllocated, value)
		if err != nil {
			if got != nil || !strings.HasPrefix(err.Error(), "annotation "+AnnotationHAMiAllocated+": container entry ") {
				t.Errorf("DecodeHAMiAllocation(%q) = %v, %v; want no entries and an error naming the annotation and the entry", value, got, err)
			}
			return
		}
		for i, c := range got {
			checkEntry(t, i, c)
		}
		enc := EncodeHAMiAllocation(0, got)
		if want := withLastColons(strings.TrimSuffix(value, hamiEntryEnd)) + hamiEntryEnd; got != nil && enc != want {
			t.Errorf("EncodeHAMiAllocation(DecodeHAMiAllocation(%q)) = %q, want %q", value, enc, want)
		}
		again, err := DecodeHAMiAllocation(AnnotationHAMiAllocated, enc)
		if err != nil {
			t.Fatalf("decode %q written back from %q: %v", enc, value, err)
		}
		if len(got) == 0 {
			return // "" and ";" both mean no card
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Errorf("round trip of %q via %q (-decoded +re-decoded):\n%s", value, enc, diff)
		}
	})
}
