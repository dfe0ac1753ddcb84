//go:build e2e

package e2e

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/framework"
)

// TestStartFailureTearsDown: a control plane whose last component (the
// scheduler, here a script that exits at once) cannot start fails with that
// component's log in the error, and leaves none of the others running.
func TestStartFailureTearsDown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bins := framework.Binaries{Dir: t.TempDir()}
	for _, name := range []string{framework.BinEtcd, framework.BinKubeAPIServer, framework.BinControllerManager, framework.BinKwok} {
		if err := os.Symlink(binaries.Path(name), bins.Path(name)); err != nil {
			t.Fatal(err)
		}
	}
	script := "#!/bin/sh\necho 'scheduler: cannot start on purpose' >&2\nexit 3\n"
	if err := os.WriteFile(bins.Path(framework.BinScheduler), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "vshare-e2e-fail-") // short: sockets live under it
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	c, err := framework.Start(ctx, framework.Options{Binaries: bins, WorkDir: dir})
	if err == nil {
		c.Stop()
		t.Fatal("Start succeeded with a scheduler that exits at once")
	}
	msg := err.Error()
	t.Logf("Start failed as it should; first line: %s", strings.SplitN(msg, "\n", 2)[0])
	if !strings.Contains(msg, "start vc-scheduler") || !strings.Contains(msg, "cannot start on purpose") {
		t.Errorf("error does not name the scheduler and show its log tail:\n%s", msg)
	}
	if alive := childrenOf(t, dir); len(alive) > 0 {
		t.Errorf("processes still running after a failed Start: %v", alive)
	}
}

// childrenOf lists the pids whose command line mentions dir.
func childrenOf(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	var pids []string
	for _, e := range entries {
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || !strings.Contains(string(cmdline), dir) {
			continue
		}
		if stat, err := os.ReadFile("/proc/" + e.Name() + "/stat"); err == nil && strings.Contains(string(stat), ") Z ") {
			continue // a zombie is already dead
		}
		pids = append(pids, e.Name())
	}
	return pids
}
