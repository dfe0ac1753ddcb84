package kubectlvshare

import (
	"strings"
	"testing"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// TestUnreadableScoresListedAsError: a node whose link scores do not parse
// still lists its cards, and the scores appear among the node's errors
// naming the annotation.
func TestUnreadableScoresListedAsError(t *testing.T) {
	kinds, err := newKinds(nil)
	if err != nil {
		t.Fatal(err)
	}
	n := node("gpu-s", vgpuproto.AnnotationRegister, vgpuproto.EncodeRegister([]vgpuproto.Card{a100("GPU-s0", true), a100("GPU-s1", true)}),
		vgpuproto.AnnotationHAMiScore, "{")
	nc := nodeCards(accountNode(kinds, n, nil))
	if len(nc.Cards) != 2 {
		t.Errorf("cards %+v, want both cards listed", nc.Cards)
	}
	if len(nc.Errors) != 1 || nc.Errors[0].Pod != "" || !strings.Contains(nc.Errors[0].Message, vgpuproto.AnnotationHAMiScore) {
		t.Errorf("errors %+v, want one naming %s", nc.Errors, vgpuproto.AnnotationHAMiScore)
	}
}
