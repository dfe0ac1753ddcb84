//go:build e2e

package framework

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Binary names, as Binaries.Path takes them.
const (
	BinEtcd              = "etcd"
	BinKubeAPIServer     = "kube-apiserver"
	BinControllerManager = "vc-controller-manager"
	BinKwok              = "kwok"
	BinScheduler         = "vc-scheduler"
	BinDevicePlugin      = "vgpu-device-plugin"
	// BinVNPUAgent is the simulated HAMi Ascend node agent (vnpu/agent).
	BinVNPUAgent = "vnpu-agent"
	// BinKubectlVshare is the kubectl plugin (cmd/kubectl-vshare).
	BinKubectlVshare = "kubectl-vshare"
	// BinStockScheduler is Volcano v1.10.0's own scheduler, with its
	// built-in deviceshare, for the interoperability tests.
	BinStockScheduler = "vc-scheduler-stock"
)

// KwokVersion is installed with `go install` in its own module graph: pulling
// kwok into this module's go.mod would upgrade dozens of shared dependencies.
const KwokVersion = "v0.6.1"

// EnvCacheDir overrides the cache root (default $XDG_CACHE_HOME/vshare-e2e or
// ~/.cache/vshare-e2e).
const EnvCacheDir = "VSHARE_E2E_CACHE"

// Binaries locates the harness's executables.
type Binaries struct {
	// Dir holds the third-party binaries (and kwok) by their Bin* names,
	// shared by every checkout with the same go.sum.
	Dir string
	// Own holds this project's binaries (ours), one directory per checkout:
	// runs from two worktrees at once must not run each other's agent or
	// scheduler. Empty: in Dir.
	Own string
}

// Path returns the path of the named binary.
func (b Binaries) Path(name string) string {
	if b.Own != "" {
		for _, o := range ours {
			if o[0] == name {
				return filepath.Join(b.Own, name)
			}
		}
	}
	return filepath.Join(b.Dir, name)
}

// thirdParty are built from this module's graph (pinned by go.sum) and cached:
// name -> package.
var thirdParty = [][2]string{
	{BinEtcd, "./e2e/cmd/etcd"},
	{BinKubeAPIServer, "k8s.io/kubernetes/cmd/kube-apiserver"},
	{BinControllerManager, "volcano.sh/volcano/cmd/controller-manager"},
	{BinStockScheduler, "volcano.sh/volcano/cmd/scheduler"},
}

// ours are this project's binaries, rebuilt on every run (incrementally, so
// seconds when nothing changed) because their source is what is under test.
var ours = [][2]string{
	{BinScheduler, "./cmd/vc-scheduler"},
	{BinDevicePlugin, "./cmd/vgpu-device-plugin"},
	{BinVNPUAgent, "./cmd/vnpu-agent"},
	{BinKubectlVshare, "./cmd/kubectl-vshare"},
}

// ModuleRoot returns the directory of this repository's go.mod.
func ModuleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("not inside the vshare module (go env GOMOD is empty)")
	}
	return filepath.Dir(gomod), nil
}

// CacheDir returns <cache root>/<first 16 hex of sha256(go.sum)>.
func CacheDir(root string) (string, error) {
	base := os.Getenv(EnvCacheDir)
	if base == "" {
		c, err := os.UserCacheDir() // honours XDG_CACHE_HOME
		if err != nil {
			// No HOME (a bare CI environment): the temporary directory
			// still caches across runs on the machine.
			c = os.TempDir()
		}
		base = filepath.Join(c, "vshare-e2e")
	}
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		return "", fmt.Errorf("read go.sum: %w", err)
	}
	h := sha256.Sum256(sum)
	return filepath.Join(base, hex.EncodeToString(h[:])[:16]), nil
}

// buildThirdParty builds into bins.Dir the third-party binaries that want
// accepts and the cache lacks, and returns their names. The caller holds
// the cache's build lock.
func buildThirdParty(ctx context.Context, root string, bins Binaries, log io.Writer, want func(name string) bool) ([]string, error) {
	var built []string
	for _, b := range thirdParty {
		if !want(b[0]) {
			continue
		}
		if _, err := os.Stat(bins.Path(b[0])); err == nil {
			continue
		}
		fmt.Fprintf(log, "e2e: building %s (cold builds take minutes; cached in %s)\n", b[0], bins.Dir)
		if err := goBuild(ctx, root, bins.Path(b[0]), b[1], log); err != nil {
			return built, err
		}
		built = append(built, b[0])
	}
	return built, nil
}

// EnsureBinaries builds what is missing from the cache and rebuilds this
// project's own binaries. Progress goes to log. A file lock keeps concurrent
// runs on one machine from building the same thing twice.
func EnsureBinaries(ctx context.Context, log io.Writer) (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	cache, err := CacheDir(root)
	if err != nil {
		return Binaries{}, err
	}
	tree := sha256.Sum256([]byte(root))
	bins := Binaries{Dir: filepath.Join(cache, "bin"), Own: filepath.Join(cache, "trees", hex.EncodeToString(tree[:])[:12])}
	for _, dir := range []string{bins.Dir, bins.Own} {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return Binaries{}, fmt.Errorf("create %s: %w", dir, err)
		}
	}
	unlock, err := lockFile(filepath.Join(cache, "build.lock"))
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()

	start := time.Now()
	missing, err := buildThirdParty(ctx, root, bins, log, func(string) bool { return true })
	if err != nil {
		return Binaries{}, err
	}
	if _, err := os.Stat(bins.Path(BinKwok)); err != nil {
		missing = append(missing, BinKwok)
		fmt.Fprintf(log, "e2e: installing kwok %s in its own module graph\n", KwokVersion)
		if err := installKwok(ctx, bins.Dir, log); err != nil {
			return Binaries{}, err
		}
	}
	for _, b := range ours {
		if err := goBuild(ctx, root, bins.Path(b[0]), b[1], log); err != nil {
			return Binaries{}, err
		}
	}
	fmt.Fprintf(log, "e2e: binaries ready in %s and, this checkout's own, %s (built %v in %s)\n",
		bins.Dir, bins.Own, missing, time.Since(start).Round(time.Second))
	return bins, nil
}

// TestTags are the build tags of every binary the harness builds: e2e, and
// vsharetest, which compiles in the test-only hooks of this project's
// binaries (the scheduler's VSHARE_TEST_CRASH_AT_BIND, deviceshare/bind/
// crashhook.go) that the crash tests and the fault campaign arm. Release
// builds (images/, make build) never set vsharetest, so the hooks are absent
// from what ships.
const TestTags = "e2e,vsharetest"

// goBuild builds pkg into out atomically (a temporary name, then rename),
// with TestTags.
func goBuild(ctx context.Context, root, out, pkg string, log io.Writer) error {
	tmp := out + ".tmp"
	args := []string{"build", "-tags", TestTags, "-o", tmp}
	if strings.HasPrefix(pkg, "k8s.io/kubernetes/") {
		args = append(args, "-ldflags", KubeVersionLDFlags)
	}
	cmd := exec.CommandContext(ctx, "go", append(args, pkg)...)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go build %s: %w", pkg, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("install %s: %w", out, err)
	}
	return nil
}

// installKwok runs `go install sigs.k8s.io/kwok/cmd/kwok@KwokVersion` outside
// this module so its dependency graph stays its own.
func installKwok(ctx context.Context, binDir string, log io.Writer) error {
	tmp, err := os.MkdirTemp("", "vshare-kwok-")
	if err != nil {
		return fmt.Errorf("kwok install directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", "sigs.k8s.io/kwok/cmd/kwok@"+KwokVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=-buildvcs=false")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go install kwok@%s: %w", KwokVersion, err)
	}
	if err := os.Rename(filepath.Join(tmp, BinKwok), filepath.Join(binDir, BinKwok)); err != nil {
		return fmt.Errorf("install kwok: %w", err)
	}
	return nil
}

// lockFile takes an exclusive flock on path and returns its release.
func lockFile(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
}
