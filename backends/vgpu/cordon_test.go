package vgpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func TestCordonFilter(t *testing.T) {
	tests := []struct {
		name string
		// annotations are node annotation key/value pairs.
		annotations []string
		held        []*v1.Pod
		pod         *v1.Pod
		want        *device.Status
		// wantCard is the card Allocate picks when the pod fits.
		wantCard string
	}{
		{name: "no cordon", pod: one("p", 1, 1000, 0), wantCard: "GPU-0"},
		{name: "cordoned card is skipped", annotations: []string{vgpuproto.AnnotationCordon, "GPU-0"},
			pod: one("p", 1, 1000, 0), wantCard: "GPU-1"},
		{name: "HAMi's key cordons too", annotations: []string{vgpuproto.AnnotationHAMiCordon, " GPU-0 ,, GPU-1"},
			pod: one("p", 1, 1000, 0), wantCard: "GPU-2"},
		{name: "every card cordoned", annotations: []string{vgpuproto.AnnotationCordon, "GPU-0,GPU-1,GPU-2,GPU-3"},
			pod: one("p", 1, 1000, 0), want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonCordoned)},
		{name: "two cards asked, three cordoned", annotations: []string{vgpuproto.AnnotationCordon, "GPU-0,GPU-1,GPU-2"},
			pod: one("p", 2, 1000, 0), want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewFitting, ReasonCordoned)},
		{name: "a typo keeps the other entries", annotations: []string{vgpuproto.AnnotationCordon, "GPU-0,GPU-9"},
			pod: one("p", 1, 1000, 0), wantCard: "GPU-1"},
		{name: "use-gpuuuid does not override a cordon", annotations: []string{vgpuproto.AnnotationCordon, "GPU-2"},
			pod:  one("p", 1, 1000, 0, vgpuproto.AnnotationUseUUID, "GPU-2"),
			want: device.NewStatus(device.UnschedulableAndUnresolvable, ReasonCordoned, ReasonUUIDExcluded)},
		{name: "binpack leaves the cordoned card's sharer alone", annotations: []string{vgpuproto.AnnotationCordon, "GPU-3"},
			held: []*v1.Pod{placed(one("a", 1, 1000, 0), "GPU-3,NVIDIA,1000,0:")},
			pod:  one("p", 1, 1000, 0), wantCard: "GPU-0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t)
			d := devicesOf(t, b, fourCards(tt.annotations...), tt.held...)
			got := d.FilterNode(tt.pod, device.PolicyBinpack)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("FilterNode (-want +got):\n%s", diff)
			}
			if tt.want != nil {
				return
			}
			ids := allocated(t, d, tt.pod, device.PolicyBinpack)
			if !strings.HasPrefix(ids, tt.wantCard+",") {
				t.Errorf("allocated %q, want card %s", ids, tt.wantCard)
			}
		})
	}
}

// TestCordonKeepsRunningPods: a pod holding a card that is then cordoned
// stays accounted (its share is not handed out again) and can be released.
func TestCordonKeepsRunningPods(t *testing.T) {
	b := newBackend(t)
	holder := placed(one("a", 1, 16000, 0), "GPU-0,NVIDIA,16000,0:")
	d := devicesOf(t, b, vgpuNode([]card{gpu("GPU-0", 16384)}, vgpuproto.AnnotationCordon, "GPU-0"), holder)
	cards, pods := d.CardUsage()
	if pods != 1 || cards[0].MemoryUsedMiB != 16000 || !cards[0].Cordoned {
		t.Fatalf("CardUsage = %+v, %d pods; want the holder's 16000 MiB on a cordoned card", cards, pods)
	}
	if !strings.Contains(d.GetStatus(), ", cordoned") {
		t.Errorf("GetStatus %q does not show the cordon", d.GetStatus())
	}
	if err := d.SubResource(holder); err != nil {
		t.Fatal(err)
	}
	if cards, _ := d.CardUsage(); cards[0].MemoryUsedMiB != 0 {
		t.Errorf("after SubResource the card holds %d MiB", cards[0].MemoryUsedMiB)
	}
}

func TestCordonProblems(t *testing.T) {
	tests := []struct {
		name        string
		annotations []string
		// want are substrings of the single warning, none when empty.
		want []string
	}{
		{name: "valid", annotations: []string{vgpuproto.AnnotationCordon, "GPU-1, GPU-2,"}},
		{name: "empty value", annotations: []string{vgpuproto.AnnotationCordon, " "}},
		{name: "unknown card", annotations: []string{vgpuproto.AnnotationCordon, "GPU-1,GPU-7"},
			want: []string{vgpuproto.AnnotationCordon, `"GPU-1,GPU-7"`, `"GPU-7" names no card of the node`, "GPU-0, GPU-1, GPU-2, GPU-3"}},
		{name: "wrong separator", annotations: []string{vgpuproto.AnnotationHAMiCordon, "GPU-1;GPU-2"},
			want: []string{vgpuproto.AnnotationHAMiCordon, `"GPU-1;GPU-2" malformed`, "separated by commas"}},
		{name: "space inside", annotations: []string{vgpuproto.AnnotationCordon, "GPU-1 GPU-2"},
			want: []string{`"GPU-1 GPU-2" malformed`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := newBackend(t)
			dv, err := b.NewDevices(fourCards(tt.annotations...))
			if err != nil {
				t.Fatalf("NewDevices: %v (a bad cordon must not take the node's cards away)", err)
			}
			warns := dv.(device.InventoryWarner).InventoryWarnings()
			if len(tt.want) == 0 {
				if len(warns) != 0 {
					t.Fatalf("warnings %v, want none", warns)
				}
				return
			}
			if len(warns) != 1 {
				t.Fatalf("warnings %v, want one", warns)
			}
			for _, s := range tt.want {
				if !strings.Contains(warns[0].Error(), s) {
					t.Errorf("warning %q does not contain %q", warns[0], s)
				}
			}
		})
	}
}

// TestCordonInventoryKey: cordoning or uncordoning changes what NewDevices
// reads, so the ledger decodes the node again.
func TestCordonInventoryKey(t *testing.T) {
	b := newBackend(t)
	plain := b.InventoryKey(fourCards())
	keys := map[string]bool{plain: true}
	for _, n := range []*v1.Node{
		fourCards(vgpuproto.AnnotationCordon, "GPU-0"),
		fourCards(vgpuproto.AnnotationCordon, "GPU-1"),
		fourCards(vgpuproto.AnnotationHAMiCordon, "GPU-0"),
	} {
		k := b.InventoryKey(n)
		if keys[k] {
			t.Errorf("InventoryKey %q repeats for %v", k, n.Annotations)
		}
		keys[k] = true
	}
}

func TestCordonExplain(t *testing.T) {
	b := newBackend(t)
	d := devicesOf(t, b, vgpuNode([]card{gpu("GPU-0", 16384), gpu("GPU-1", 16384)}, vgpuproto.AnnotationCordon, "GPU-1"),
		placed(one("a", 1, 16000, 0), "GPU-0,NVIDIA,16000,0:"))
	got := d.ExplainCards(one("p", 1, 1000, 0), device.PolicyBinpack)
	want := []device.CardVerdict{
		{Index: 0, Reason: ReasonInsufficientMem, Resolvable: true},
		{Index: 1, Reason: ReasonCordoned},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ExplainCards (-want +got):\n%s", diff)
	}
}
