package gpushare

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// cards builds the CardStatus of n healthy idle cards of mem MiB, with the
// listed indices unhealthy.
func cards(n int, mem int64, unhealthy ...int) []CardStatus {
	out := make([]CardStatus, n)
	for i := range out {
		out[i] = CardStatus{Index: i, Healthy: true, TotalMemory: mem}
	}
	for _, i := range unhealthy {
		out[i].Healthy = false
	}
	return out
}

func TestNewDevices(t *testing.T) {
	tests := []struct {
		name      string
		mode      Mode
		node      *v1.Node
		want      []CardStatus
		wantErr   []string // substrings of the error
		wantNoDev bool     // NewDevices returns (nil, nil)
	}{
		{name: "share: no capacity", mode: ModeShare, node: gpuNode("", ""), wantNoDev: true},
		{name: "number: no capacity", mode: ModeNumber, node: gpuNode("", ""), wantNoDev: true},
		{name: "share: zero cards", mode: ModeShare, node: gpuNode("0", ""), wantNoDev: true},
		{name: "number: zero cards, memory present", mode: ModeNumber, node: gpuNode("0", "1024"), wantNoDev: true},
		{name: "share: number-mode node without memory", mode: ModeShare, node: gpuNode("4", ""), wantNoDev: true},
		{name: "share: four cards", mode: ModeShare, node: fourCards(), want: cards(4, 16384)},
		{name: "share: memory split with floor", mode: ModeShare, node: gpuNode("3", "10000"), want: cards(3, 3333)},
		{name: "number: cards without memory", mode: ModeNumber, node: gpuNode("2", ""), want: cards(2, 0)},
		{name: "number: cards with memory", mode: ModeNumber, node: gpuNode("2", "32768"), want: cards(2, 16384)},
		{
			name: "unhealthy cards", mode: ModeShare,
			node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "1,3"), want: cards(4, 16384, 1, 3),
		},
		{
			name: "unhealthy list with spaces, repeats and a trailing comma", mode: ModeNumber,
			node: fourCards(gpushareproto.AnnotationUnhealthyIDs, " 2 , 0,2,"), want: cards(4, 16384, 0, 2),
		},
		{name: "empty unhealthy list", mode: ModeShare, node: fourCards(gpushareproto.AnnotationUnhealthyIDs, ""), want: cards(4, 16384)},
		{
			name: "unhealthy entry not a number", mode: ModeShare, node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "0,gpu1"),
			wantErr: []string{gpushareproto.AnnotationUnhealthyIDs, `"0,gpu1"`, `entry "gpu1"`, "[0, 3]"},
		},
		{
			name: "unhealthy entry out of range", mode: ModeNumber, node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "4"),
			wantErr: []string{gpushareproto.AnnotationUnhealthyIDs, `entry "4"`},
		},
		{
			name: "unhealthy entry negative", mode: ModeShare, node: fourCards(gpushareproto.AnnotationUnhealthyIDs, "-1"),
			wantErr: []string{gpushareproto.AnnotationUnhealthyIDs, `entry "-1"`},
		},
		{
			name: "share: memory without cards", mode: ModeShare, node: gpuNode("", "16384"),
			wantErr: []string{"volcano.sh/gpu-memory=16384", "volcano.sh/gpu-number is absent or 0"},
		},
		{
			name: "share: less memory than cards", mode: ModeShare, node: gpuNode("4", "3"),
			wantErr: []string{"volcano.sh/gpu-memory=3 is smaller than volcano.sh/gpu-number=4"},
		},
		{
			name: "fractional card count", mode: ModeNumber, node: gpuNode("1500m", ""),
			wantErr: []string{"volcano.sh/gpu-number=1500m", "want a whole number in [0, 1024]"},
		},
		{
			name: "too many cards", mode: ModeNumber, node: gpuNode("5000", ""),
			wantErr: []string{"volcano.sh/gpu-number=5k"},
		},
		{
			name: "negative memory", mode: ModeShare, node: gpuNode("4", "-4"),
			wantErr: []string{"volcano.sh/gpu-memory=-4"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := newBackend(t, tc.mode).NewDevices(tc.node)
			if tc.wantErr != nil {
				if err == nil {
					t.Fatalf("NewDevices = %v, want an error", got)
				}
				for _, s := range append(tc.wantErr, "node node-a") {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("NewDevices: %v", err)
			}
			if tc.wantNoDev {
				if got != nil {
					t.Fatalf("NewDevices = %v, want nil", got.GetStatus())
				}
				return
			}
			if diff := cmp.Diff(tc.want, got.(*Devices).Cards()); diff != "" {
				t.Errorf("cards (-want +got):\n%s", diff)
			}
		})
	}
}

func TestInventoryKey(t *testing.T) {
	b := newBackend(t, ModeShare)
	base := b.InventoryKey(fourCards())
	if got := b.InventoryKey(fourCards()); got != base {
		t.Errorf("InventoryKey of an equal node = %q, want %q", got, base)
	}
	noMem := gpuNode("4", "")
	unrelated := fourCards("example.com/other", "x")
	unrelated.Status.Capacity[v1.ResourceMemory] = unrelated.Status.Capacity[v1.ResourceCPU]
	if got := b.InventoryKey(unrelated); got != base {
		t.Errorf("InventoryKey changed with fields NewDevices does not read: %q, want %q", got, base)
	}
	for _, n := range []*v1.Node{
		gpuNode("8", "65536"), gpuNode("4", "32768"), noMem, gpuNode("", "65536"),
		fourCards(gpushareproto.AnnotationUnhealthyIDs, "1"), fourCards(gpushareproto.AnnotationUnhealthyIDs, "1,2"),
	} {
		if got := b.InventoryKey(n); got == base {
			t.Errorf("InventoryKey(%v, %v) = %q, same as the base node's", n.Status.Capacity, n.Annotations, got)
		}
	}
}
