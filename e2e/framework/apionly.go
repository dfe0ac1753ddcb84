//go:build e2e

package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"
)

// EnsureAPIServerBinaries is EnsureBinaries for StartAPIServer: it builds
// etcd and kube-apiserver into the shared cache if they are missing, and
// none of this project's binaries (whose rebuild the in-process benchmarks
// do not need).
func EnsureAPIServerBinaries(ctx context.Context, log io.Writer) (Binaries, error) {
	root, err := ModuleRoot()
	if err != nil {
		return Binaries{}, err
	}
	cache, err := CacheDir(root)
	if err != nil {
		return Binaries{}, err
	}
	bins := Binaries{Dir: filepath.Join(cache, "bin")}
	if err := os.MkdirAll(bins.Dir, 0o755); err != nil {
		return Binaries{}, fmt.Errorf("create %s: %w", bins.Dir, err)
	}
	unlock, err := lockFile(filepath.Join(cache, "build.lock"))
	if err != nil {
		return Binaries{}, err
	}
	defer unlock()
	if _, err := buildThirdParty(ctx, root, bins, log, func(name string) bool {
		return name == BinEtcd || name == BinKubeAPIServer
	}); err != nil {
		return Binaries{}, err
	}
	return bins, nil
}

// StartAPIServer brings up only etcd and kube-apiserver: no Volcano
// controller, kwok, scheduler or nodes. The in-process benchmarks use it to
// give Volcano's built-in vGPU code, which PATCHes pods through its own
// client, the real API server instead of a stand-in (e2e/benchapi).
// opts.Binaries must hold etcd and kube-apiserver; SchedulerConf is
// ignored. On error everything already started is stopped.
func StartAPIServer(ctx context.Context, opts Options) (_ *Cluster, err error) {
	c := &Cluster{bins: opts.Binaries, log: opts.Log, WorkDir: opts.WorkDir, audit: opts.Audit}
	if c.log == nil {
		c.log = io.Discard
	}
	if c.WorkDir == "" {
		if c.WorkDir, err = os.MkdirTemp("", "vshare-api-"); err != nil {
			return nil, fmt.Errorf("create work directory: %w", err)
		}
	}
	for _, d := range []string{"logs", "etcd", "certs"} {
		if err := os.MkdirAll(filepath.Join(c.WorkDir, d), 0o755); err != nil {
			return nil, fmt.Errorf("create %s: %w", d, err)
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w\n%s", err, c.Tails(30))
			c.Stop()
		}
	}()
	for _, s := range []struct {
		name string
		f    func(context.Context) error
	}{{"etcd", c.startEtcd}, {"kube-apiserver", c.startAPIServer}} {
		t := time.Now()
		if err := s.f(ctx); err != nil {
			return nil, fmt.Errorf("start %s: %w", s.name, err)
		}
		fmt.Fprintf(c.log, "e2e: %s up in %s\n", s.name, time.Since(t).Round(time.Millisecond))
	}
	return c, nil
}
