package inventory

import (
	"errors"
	"fmt"
	"testing"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func node(annotations ...string) *v1.Node {
	n := &v1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a", Annotations: map[string]string{}}}
	for i := 0; i+1 < len(annotations); i += 2 {
		n.Annotations[annotations[i]] = annotations[i+1]
	}
	return n
}

const (
	twoCards = "GPU-a,10,16384,NVIDIA-T4,true,hami-core:GPU-b,10,16384,NVIDIA-T4,true,hami-core:"
	hamiCard = "GPU-h,8,24576,200,NVIDIA-L4,1,true,0,hami-core:"
)

func TestDecode(t *testing.T) {
	tests := []struct {
		name          string
		node          *v1.Node
		wantNil       bool
		wantSource    string
		wantCards     int
		wantInitAgent bool
		wantCordoned  []bool
		wantLinks     bool
		wantWarnings  int
		wantIgnored   int
	}{
		{name: "no registration", node: node(), wantNil: true},
		{name: "agent marked deleted", node: node(vgpuproto.AnnotationRegister, twoCards,
			vgpuproto.AnnotationHandshake, "Deleted_2026.01.01 00:00:00"), wantNil: true},
		{name: "volcano register without numa: its agent serves no init container",
			node: node(vgpuproto.AnnotationRegister, twoCards), wantSource: vgpuproto.AnnotationRegister, wantCards: 2},
		{name: "HAMi register", node: node(vgpuproto.AnnotationHAMiRegister, hamiCard),
			wantSource: vgpuproto.AnnotationHAMiRegister, wantCards: 1, wantInitAgent: true},
		{name: "volcano register wins over HAMi's", node: node(vgpuproto.AnnotationRegister, twoCards,
			vgpuproto.AnnotationHAMiRegister, hamiCard), wantSource: vgpuproto.AnnotationRegister, wantCards: 2},
		{name: "cordon, an entry naming no card is a warning", node: node(vgpuproto.AnnotationRegister, twoCards,
			vgpuproto.AnnotationCordon, "GPU-b,GPU-z"), wantSource: vgpuproto.AnnotationRegister, wantCards: 2,
			wantCordoned: []bool{false, true}, wantWarnings: 1, wantIgnored: 1},
		{name: "unreadable link scores are a warning", node: node(vgpuproto.AnnotationRegister, twoCards,
			vgpuproto.AnnotationHAMiScore, "["), wantSource: vgpuproto.AnnotationRegister, wantCards: 2, wantWarnings: 1},
		{name: "link scores", node: node(vgpuproto.AnnotationRegister, twoCards, vgpuproto.AnnotationHAMiScore,
			`[{"uuid":"GPU-a","score":{"GPU-b":40}},{"uuid":"GPU-b","score":{"GPU-a":40}}]`),
			wantSource: vgpuproto.AnnotationRegister, wantCards: 2, wantLinks: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			inv, err := Decode(tc.node)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if tc.wantNil {
				if inv != nil {
					t.Fatalf("Decode = %+v, want nil", inv)
				}
				return
			}
			if inv.Source != tc.wantSource || len(inv.Cards) != tc.wantCards || inv.InitAgent != tc.wantInitAgent {
				t.Errorf("Decode: source %q, %d cards, init agent %v; want %q, %d, %v",
					inv.Source, len(inv.Cards), inv.InitAgent, tc.wantSource, tc.wantCards, tc.wantInitAgent)
			}
			if fmt.Sprint(inv.Cordoned) != fmt.Sprint(tc.wantCordoned) {
				t.Errorf("cordoned = %v, want %v", inv.Cordoned, tc.wantCordoned)
			}
			if (inv.Links != nil) != tc.wantLinks || (inv.Links != nil && len(inv.Links) != 4) {
				t.Errorf("links = %v, want a 2 x 2 matrix: %v", inv.Links, tc.wantLinks)
			}
			ignored := 0
			for _, w := range inv.Warnings {
				if errors.As(w, new(device.IgnoredSetting)) {
					ignored++
				}
			}
			if len(inv.Warnings) != tc.wantWarnings || ignored != tc.wantIgnored {
				t.Errorf("warnings = %v, want %d of which %d ignored settings", inv.Warnings, tc.wantWarnings, tc.wantIgnored)
			}
		})
	}
}

func TestDecodeMalformed(t *testing.T) {
	for _, n := range []*v1.Node{
		node(vgpuproto.AnnotationRegister, "GPU-a,ten,16384,NVIDIA-T4,true:"),
		node(vgpuproto.AnnotationHAMiRegister, "[{"),
	} {
		if inv, err := Decode(n); err == nil {
			t.Errorf("Decode(%v) = %+v, want an error", n.Annotations, inv)
		}
	}
}
