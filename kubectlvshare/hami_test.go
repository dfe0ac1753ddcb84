package kubectlvshare

import (
	"testing"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// A pod bound on a node HAMi's plugin serves carries hami.io/bind-phase
// only; `pods` shows it.
func TestPodsShowHAMiBindPhase(t *testing.T) {
	kinds, err := newKinds(config.Default())
	if err != nil {
		t.Fatal(err)
	}
	p := vgpuPod("ns", "p", 0, 1, 1000, 10, "hami-node", "GPU-0,NVIDIA,1000,10:", "")
	delete(p.Annotations, vgpuproto.AnnotationBindPhase)
	p.Annotations[vgpuproto.AnnotationHAMiBindPhase] = "success"
	if got := podCards(p, kinds[:1], nil).BindPhase; got != "success" {
		t.Errorf("BindPhase = %q, want hami.io/bind-phase's success", got)
	}
}
