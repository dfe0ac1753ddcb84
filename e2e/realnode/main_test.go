//go:build e2e

package realnode

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/internal/testroot"
)

// rc is the real node and its control plane, shared by the package's tests
// (the kubelet's device-plugin directory is the machine's: one real node at
// a time).
var rc *framework.RealCluster

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	teardown, stopWatching := framework.OnSignal(cancel)
	defer stopWatching()
	if err := framework.RealNodeUnavailable(); err != nil {
		if testroot.Required() {
			fmt.Fprintf(os.Stderr, "e2e: real node: %v (%s=1: the real-node tests must run)\n", err, testroot.EnvRequired)
			return 1
		}
		fmt.Fprintf(os.Stderr, "e2e: skipping the real-node tests: %v\n", err)
		return 0
	}
	start := time.Now()
	setupCtx, cancelSetup := context.WithTimeout(ctx, 45*time.Minute)
	defer cancelSetup()
	c, err := framework.StartRealCluster(setupCtx, framework.RealClusterOptions{Log: os.Stderr})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: real node:", err)
		return 1
	}
	defer c.Stop()
	teardown.Set(func() {
		c.Stop()
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", c.WorkDir)
	})
	fmt.Fprintf(os.Stderr, "e2e: real node ready in %s; work directory %s\n", time.Since(start).Round(time.Millisecond), c.WorkDir)
	rc = c
	code := m.Run()
	c.Stop()
	if code != 0 || os.Getenv("VSHARE_E2E_KEEP") != "" {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", c.WorkDir)
	} else {
		_ = c.RemoveWorkDir()
	}
	return code
}
