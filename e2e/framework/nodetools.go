//go:build e2e

package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"time"
)

// The real node's Kubernetes binaries, built from e2e/nodetools, a module
// of their own (see its tools.go): the main module pins runc v1.0.3 for
// Volcano and the kubelet needs runc v1.1.
const (
	BinKubelet           = "kubelet"
	BinKubeProxy         = "kube-proxy"
	BinKubeScheduler     = "kube-scheduler"
	BinKubeControllerMgr = "kube-controller-manager"
)

// nodeTools are built from e2e/nodetools: name -> package.
var nodeTools = [][2]string{
	{BinKubelet, "k8s.io/kubernetes/cmd/kubelet"},
	{BinKubeProxy, "k8s.io/kubernetes/cmd/kube-proxy"},
	{BinKubeScheduler, "k8s.io/kubernetes/cmd/kube-scheduler"},
	{BinKubeControllerMgr, "k8s.io/kubernetes/cmd/kube-controller-manager"},
}

// KubeVersion is the Kubernetes release the harness runs.
const KubeVersion = "v1.30.2"

// KubeVersionLDFlags stamp a Kubernetes binary with its release, as
// Kubernetes' build does (hack/lib/version.sh): without them it reports
// v0.0.0-master, which the kubelet publishes in the node's status and helm
// refuses against a chart's kubeVersion.
var KubeVersionLDFlags = "-X k8s.io/component-base/version.gitVersion=" + KubeVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=30" +
	" -X k8s.io/component-base/version.gitTreeState=clean" +
	" -X k8s.io/client-go/pkg/version.gitVersion=" + KubeVersion +
	" -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=30"

// NodeTools locates the real node's Kubernetes binaries.
type NodeTools struct {
	// Dir holds them by their Bin* names.
	Dir string
}

// Path returns the path of the named binary.
func (t NodeTools) Path(name string) string { return filepath.Join(t.Dir, name) }

// EnsureNodeTools builds the kubelet, kube-proxy, kube-scheduler and
// kube-controller-manager into <cache root>/nodetools-<sha256(go.sum,
// ldflags)[:16]>/
// when the cache lacks them (about 10 minutes cold on 2 cores, shared in
// part with kube-apiserver's build cache). A file lock serialises
// concurrent runs.
func EnsureNodeTools(ctx context.Context, log io.Writer) (NodeTools, error) {
	root, err := ModuleRoot()
	if err != nil {
		return NodeTools{}, err
	}
	mod := filepath.Join(root, "e2e", "nodetools")
	sum, err := os.ReadFile(filepath.Join(mod, "go.sum"))
	if err != nil {
		return NodeTools{}, fmt.Errorf("read e2e/nodetools/go.sum: %w", err)
	}
	base, err := CacheDir(root)
	if err != nil {
		return NodeTools{}, err
	}
	// The flags are part of the key: binaries built with others differ.
	h := sha256.Sum256(append(sum, KubeVersionLDFlags+" -s -w"...))
	tools := NodeTools{Dir: filepath.Join(filepath.Dir(base), "nodetools-"+hex.EncodeToString(h[:])[:16])}
	if err := os.MkdirAll(tools.Dir, 0o755); err != nil {
		return NodeTools{}, fmt.Errorf("create %s: %w", tools.Dir, err)
	}
	unlock, err := lockFile(filepath.Join(tools.Dir, "build.lock"))
	if err != nil {
		return NodeTools{}, err
	}
	defer unlock()
	var missing []string
	for _, b := range nodeTools {
		if _, err := os.Stat(tools.Path(b[0])); err != nil {
			missing = append(missing, b[1])
		}
	}
	if len(missing) == 0 {
		return tools, nil
	}
	fmt.Fprintf(log, "e2e: building %d of the real node's Kubernetes binaries from e2e/nodetools (minutes when cold; cached in %s)\n",
		len(missing), tools.Dir)
	start := time.Now()
	tmp, err := os.MkdirTemp(tools.Dir, "build-")
	if err != nil {
		return NodeTools{}, fmt.Errorf("build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	// One go command for all: it compiles their shared packages once and
	// links them in parallel. Without symbol tables, as released.
	args := append([]string{"build", "-trimpath", "-ldflags", KubeVersionLDFlags + " -s -w", "-o", tmp + "/"}, missing...)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = mod
	// Static, as Kubernetes releases its node binaries; GOWORK off so a
	// workspace cannot pull the main module's pins in.
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=-mod=readonly")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return NodeTools{}, fmt.Errorf("go build %v (e2e/nodetools): %w", missing, err)
	}
	for _, b := range nodeTools {
		if !slices.Contains(missing, b[1]) {
			continue
		}
		if err := os.Rename(filepath.Join(tmp, filepath.Base(b[1])), tools.Path(b[0])); err != nil {
			return NodeTools{}, fmt.Errorf("install %s: %w", b[0], err)
		}
	}
	fmt.Fprintf(log, "e2e: the real node's Kubernetes binaries built in %s\n", time.Since(start).Round(time.Second))
	return tools, nil
}
