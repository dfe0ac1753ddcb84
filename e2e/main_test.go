//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/framework"
)

// EnvKeep keeps the work directory (logs, kubeconfig) after a passing run.
const EnvKeep = "VSHARE_E2E_KEEP"

// gpuNodes are the simulated DGX A100 nodes every test shares.
var gpuNodes = []string{"gpu-node-0", "gpu-node-1"}

// cluster is the control plane TestMain starts for all tests in the package;
// binaries are what it was started from.
var (
	cluster  *framework.Cluster
	binaries framework.Binaries
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	teardown, stopWatching := framework.OnSignal(cancel)
	defer stopWatching()

	buildCtx, cancelBuild := context.WithTimeout(ctx, 45*time.Minute)
	defer cancelBuild()
	bins, err := framework.EnsureBinaries(buildCtx, os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: build:", err)
		return 1
	}
	start := time.Now()
	// The audit log lets tests see what each component asked the API server
	// (TestSecurityRBACAudit).
	c, err := framework.Start(ctx, framework.Options{Binaries: bins, Log: os.Stderr, Audit: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: start control plane:", err)
		return 1
	}
	teardown.Set(func() {
		c.Stop()
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", c.WorkDir)
	})
	defer c.Stop()
	for _, n := range gpuNodes {
		if _, err := c.AddGPUNode(ctx, n, "dgxa100"); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: add node %s: %v\n%s", n, err, c.Tails(40))
			return 1
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: control plane and %d GPU nodes ready in %s; work directory %s\n",
		len(gpuNodes), time.Since(start).Round(time.Millisecond), c.WorkDir)
	cluster, binaries = c, bins

	code := m.Run()
	c.Stop()
	if code != 0 || os.Getenv(EnvKeep) != "" {
		fmt.Fprintf(os.Stderr, "e2e: logs kept in %s\n", c.WorkDir)
	} else {
		_ = c.RemoveWorkDir()
	}
	return code
}

// setup returns a context bounded by timeout and a fresh namespace; on
// failure the children's log tails are printed.
func setup(t *testing.T, namespace string, timeout time.Duration) context.Context {
	t.Helper()
	return cluster.Setup(t, namespace, timeout)
}
