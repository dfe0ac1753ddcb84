package toolkit

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// testCards are three cards with minors 0, 1 and 7.
func testCards() []fakedriver.Card {
	return []fakedriver.Card{
		{Index: 0, UUID: "GPU-aaaaaaaa-0000-4000-8000-000000000000", Minor: 0, PCIBusID: "00000000:07:00.0"},
		{Index: 1, UUID: "GPU-bbbbbbbb-1111-4111-8111-111111111111", Minor: 1, PCIBusID: "00000000:0F:00.0"},
		{Index: 2, UUID: "GPU-cccccccc-2222-4222-8222-222222222222", Minor: 7, PCIBusID: "00000000:86:00.0"},
	}
}

func TestReadRequest(t *testing.T) {
	cards := testCards()
	all := []string{"compat32", "compute", "display", "graphics", "ngx", "utility", "video"}
	def := []string{"compute", "utility"}
	tests := []struct {
		name      string
		env       []string
		supported []string
		wantCards []int
		wantCaps  []string
		wantErr   string
	}{
		{name: "unset: nothing, as runc", env: []string{"PATH=/bin"}},
		{name: "empty", env: []string{"NVIDIA_VISIBLE_DEVICES="}},
		{name: "void", env: []string{"NVIDIA_VISIBLE_DEVICES=void"}},
		{name: "void among others", env: []string{"NVIDIA_VISIBLE_DEVICES=0,void"}},
		{name: "only commas", env: []string{"NVIDIA_VISIBLE_DEVICES= , ,"}},
		{name: "all", env: []string{"NVIDIA_VISIBLE_DEVICES=all"}, wantCards: []int{0, 1, 2}, wantCaps: def},
		{name: "ALL in any case", env: []string{"NVIDIA_VISIBLE_DEVICES=ALL"}, wantCards: []int{0, 1, 2}, wantCaps: def},
		{name: "none: capabilities without cards", env: []string{"NVIDIA_VISIBLE_DEVICES=none"}, wantCaps: def},
		{name: "an index", env: []string{"NVIDIA_VISIBLE_DEVICES=2"}, wantCards: []int{2}, wantCaps: def},
		{name: "indices in any order, repeated, spaced", env: []string{"NVIDIA_VISIBLE_DEVICES= 2,0 ,2,"}, wantCards: []int{0, 2}, wantCaps: def},
		{name: "a UUID in upper case", env: []string{"NVIDIA_VISIBLE_DEVICES=GPU-BBBBBBBB-1111-4111-8111-111111111111"},
			wantCards: []int{1}, wantCaps: def},
		{name: "a PCI bus ID without leading zeros", env: []string{"NVIDIA_VISIBLE_DEVICES=0:86:0.0"}, wantCards: []int{2}, wantCaps: def},
		{name: "a UUID and an index", env: []string{"NVIDIA_VISIBLE_DEVICES=GPU-cccccccc-2222-4222-8222-222222222222,0"},
			wantCards: []int{0, 2}, wantCaps: def},
		{name: "the last of a name wins", env: []string{"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_VISIBLE_DEVICES=1"}, wantCards: []int{1}, wantCaps: def},
		{name: "an unknown UUID fails", env: []string{"NVIDIA_VISIBLE_DEVICES=0,GPU-dddddddd-3333-4333-8333-333333333333"},
			wantErr: "GPU-dddddddd-3333-4333-8333-333333333333: unknown device"},
		{name: "a UUID prefix is unknown", env: []string{"NVIDIA_VISIBLE_DEVICES=GPU-aaaaaaaa"}, wantErr: "GPU-aaaaaaaa: unknown device"},
		{name: "an index beyond the cards fails", env: []string{"NVIDIA_VISIBLE_DEVICES=3"}, wantErr: "3: unknown device"},
		{name: "a MIG device is unknown here", env: []string{"NVIDIA_VISIBLE_DEVICES=0:1"}, wantErr: "0:1: unknown device"},
		{name: "utility only", env: []string{"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=utility"},
			wantCards: []int{0}, wantCaps: []string{"utility"}},
		{name: "capabilities all", env: []string{"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=all"},
			wantCards: []int{0}, wantCaps: all},
		{name: "empty capabilities: the default", env: []string{"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES="},
			wantCards: []int{0}, wantCaps: def},
		{name: "unsupported capabilities are ignored", env: []string{"NVIDIA_VISIBLE_DEVICES=0", "NVIDIA_DRIVER_CAPABILITIES=compute,video,teleport"},
			supported: []string{"compute", "utility"}, wantCards: []int{0}, wantCaps: []string{"compute"}},
		{name: "legacy CUDA image: all of everything", env: []string{"CUDA_VERSION=11.8.0"}, wantCards: []int{0, 1, 2}, wantCaps: all},
		{name: "CUDA image with a requirement: nothing", env: []string{"CUDA_VERSION=12.4.1", "NVIDIA_REQUIRE_CUDA=cuda>=12.4"}},
		{name: "legacy CUDA image that asks for void", env: []string{"CUDA_VERSION=11.8.0", "NVIDIA_VISIBLE_DEVICES=void"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			supported := tc.supported
			if supported == nil {
				supported = all
			}
			req, err := ReadRequest(tc.env, cards, supported)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []int
			for _, c := range req.Cards {
				got = append(got, c.Index)
			}
			if diff := cmp.Diff(tc.wantCards, got, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("cards (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.wantCaps, req.Capabilities, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("capabilities (-want +got):\n%s", diff)
			}
		})
	}
}
