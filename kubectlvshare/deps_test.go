package kubectlvshare

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoVolcanoDependency: the plugin is a small client. It reads
// PodGroups with volcano.sh/apis' clientset, but links no package of
// Volcano itself (its scheduler, its controllers), nor the deviceshare
// plugin: only its arguments (deviceshare/pluginargs, which links nothing
// of Volcano), through which it builds the backends as the scheduler does
// (backends/registry).
func TestNoVolcanoDependency(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../cmd/kubectl-vshare").Output()
	if err != nil {
		t.Fatalf("go list -deps: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "volcano.sh/volcano/") || strings.HasPrefix(pkg, "github.com/vgpushare/vshare/deviceshare") && pkg != "github.com/vgpushare/vshare/deviceshare/pluginargs" {
			t.Errorf("cmd/kubectl-vshare links %s", pkg)
		}
	}
}
