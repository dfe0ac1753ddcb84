package kubectlvshare

import (
	"bytes"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/kubectlvshare/report"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestCardsShowCordon: a card cordoned by the node annotation is marked in
// the report and the table (CORDON "card", not folded with its idle
// twins); a cordon entry naming no card is a warning row.
func TestCardsShowCordon(t *testing.T) {
	kinds, err := newKinds(nil)
	if err != nil {
		t.Fatal(err)
	}
	reg := vgpuproto.EncodeRegister([]vgpuproto.Card{a100("GPU-a", true), a100("GPU-b", true), a100("GPU-c", true)})
	n := node("n1", vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationCordon, "GPU-b,GPU-zz")
	rep := cardReport(kinds, []v1.Node{*n}, nil)
	var cordoned []string
	for _, c := range rep.Nodes[0].Cards {
		if c.Cordoned {
			cordoned = append(cordoned, c.ID)
		}
	}
	if strings.Join(cordoned, ",") != "GPU-b" {
		t.Errorf("cordoned cards %v, want [GPU-b]", cordoned)
	}
	errs := rep.Nodes[0].Errors
	if len(errs) != 1 || !errs[0].Setting || !strings.Contains(errs[0].Message, `"GPU-zz" names no card`) {
		t.Errorf("errors %+v, want one setting warning naming GPU-zz", errs)
	}
	var out bytes.Buffer
	if err := report.Render(&out, report.FormatTable, rep); err != nil {
		t.Fatal(err)
	}
	table := out.String()
	lines := strings.Split(table, "\n")
	// Header, cards 0, 1 (cordoned) and 2 unfolded, the warning, the total.
	if len(lines) < 6 || !strings.Contains(lines[2], " card ") || strings.Contains(lines[1], " card ") ||
		!strings.Contains(lines[4], "warning") || !strings.Contains(lines[4], "cordon [1]") {
		t.Errorf("table:\n%s", table)
	}
}
