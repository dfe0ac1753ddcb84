package kubectlvshare

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoVolcanoDependency: the plugin is a small client. It reads
// PodGroups with volcano.sh/apis' clientset, but links no package of
// Volcano itself (its scheduler, its controllers).
func TestNoVolcanoDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../cmd/kubectl-vshare").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "volcano.sh/volcano/") || strings.HasPrefix(pkg, "github.com/vgpushare/vshare/deviceshare") && pkg != "github.com/vgpushare/vshare/device" {
			t.Errorf("cmd/kubectl-vshare links %s", pkg)
		}
	}
}
