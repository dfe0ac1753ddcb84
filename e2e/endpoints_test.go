//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/e2e/framework"
)

// probePaths are what an HTTP endpoint must not serve unless it is its
// job: Go's and Kubernetes' usual debug handlers and anything else.
var probePaths = []string{
	"/", "/debug/pprof/", "/debug/pprof/cmdline", "/debug/pprof/goroutine", "/debug/vars", "/debug/requests",
	"/debug/events", "/debug/flags/v", "/configz", "/metrics", "/metrics/x", "/healthz", "/healthz/ping", "/livez", "/readyz",
}

// served returns the probe paths url answers with anything but 404.
func served(t *testing.T, ctx context.Context, base string) []string {
	t.Helper()
	var out []string
	for _, p := range probePaths {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+p, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("GET %s%s: %v", base, p, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			out = append(out, fmt.Sprintf("%s %d", p, resp.StatusCode))
		}
	}
	return out
}

// startProbe starts bin detached and waits until url answers 200.
func startProbe(t *testing.T, ctx context.Context, name, bin, url string, args, env []string) *framework.Process {
	t.Helper()
	p, err := cluster.StartDetached(name, bin, args, env)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	err = cluster.Poll(ctx, time.Minute, name+" "+url, func(ctx context.Context) (bool, error) {
		if gone, why := p.Exited(); gone {
			return false, fmt.Errorf("%s %v:\n%s", name, why, p.Tail(30))
		}
		return httpOKCtx(ctx, url), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func httpOKCtx(ctx context.Context, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func listeners(t *testing.T, p *framework.Process) []string {
	t.Helper()
	ls, err := framework.Listeners(p.Pid())
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, 0, len(ls))
	for _, l := range ls {
		out = append(out, l.String())
	}
	sort.Strings(out)
	return out
}

// TestSecurityEndpoints runs the real binaries with their endpoints on
// 127.0.0.1 and checks that each binds exactly where configured, opens no
// other listener (from the process's sockets in /proc), and serves only its
// metrics and health paths; the same probe of Volcano v1.10.0's stock
// scheduler finds the debug handlers ours no longer serves, so the probe can
// fail. It also checks the modes of the agent's socket and cache directory.
func TestSecurityEndpoints(t *testing.T) {
	ctx := setup(t, "security-endpoints", 5*time.Minute)
	conf := filepath.Join(t.TempDir(), "volcano-scheduler.conf")
	if err := os.WriteFile(conf, []byte(framework.DefaultSchedulerConf), 0o644); err != nil {
		t.Fatal(err)
	}
	scheduler := func() (metrics, healthz, klogDir string, args []string) {
		ports, err := framework.FreePorts(2)
		if err != nil {
			t.Fatal(err)
		}
		metrics, healthz = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1])
		klogDir = t.TempDir()
		return metrics, healthz, klogDir, []string{
			"--kubeconfig=" + cluster.Kubeconfig, "--scheduler-conf=" + conf,
			"--scheduler-name=endpoint-probe", // schedules nothing of the other tests
			"--leader-elect=false", "--enable-metrics=true", "--listen-address=" + metrics,
			"--enable-healthz=true", "--healthz-address=" + healthz, "--logtostderr", "-v=2",
		}
	}

	t.Run("vc-scheduler", func(t *testing.T) {
		metrics, healthz, klogDir, args := scheduler()
		p := startProbe(t, ctx, "probe-vc-scheduler", framework.BinScheduler, "http://"+healthz+"/healthz", args,
			[]string{"DEBUG_SOCKET_DIR=" + klogDir})
		if diff := cmp.Diff([]string{"/metrics 200"}, served(t, ctx, "http://"+metrics)); diff != "" {
			t.Errorf("--listen-address %s serves (-want +got):\n%s", metrics, diff)
		}
		if diff := cmp.Diff([]string{"/healthz 200", "/healthz/ping 200"}, served(t, ctx, "http://"+healthz)); diff != "" {
			t.Errorf("--healthz-address %s serves (-want +got):\n%s", healthz, diff)
		}
		// Volcano's klog level socket (DEBUG_SOCKET_DIR): a unix socket
		// only its owner can use, opened when scheduling starts (after
		// /healthz answers).
		klogSock := filepath.Join(klogDir, "klog-klog.sock")
		err := cluster.Poll(ctx, time.Minute, "Volcano's klog socket", func(context.Context) (bool, error) {
			_, err := os.Lstat(klogSock)
			return err == nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		want := []string{"tcp " + healthz, "tcp " + metrics, "unix " + klogSock}
		sort.Strings(want)
		if diff := cmp.Diff(want, listeners(t, p)); diff != "" {
			t.Errorf("listeners (-want +got):\n%s", diff)
		}
		if fi, err := os.Lstat(klogSock); err != nil || fi.Mode().Perm()&0o077 != 0 {
			t.Errorf("%s: %v %v, want a socket closed to group and others", klogSock, fi, err)
		}
	})

	t.Run("stock Volcano scheduler (control)", func(t *testing.T) {
		metrics, healthz, klogDir, args := scheduler()
		startProbe(t, ctx, "probe-vc-scheduler-stock", framework.BinStockScheduler, "http://"+healthz+"/healthz", args,
			[]string{"DEBUG_SOCKET_DIR=" + klogDir, "KUBECONFIG=" + cluster.Kubeconfig})
		got := strings.Join(served(t, ctx, "http://"+metrics), ", ")
		for _, p := range []string{"/debug/pprof/ 200", "/debug/vars 200"} {
			if !strings.Contains(got, p) {
				t.Errorf("stock scheduler's --listen-address serves %s; want it to expose %s (the probe must see what it looks for)", got, p)
			}
		}
		t.Logf("Volcano v1.10.0's own scheduler serves on --listen-address: %s", got)
	})

	t.Run("vgpu-device-plugin", func(t *testing.T) {
		ports, err := framework.FreePorts(1)
		if err != nil {
			t.Fatal(err)
		}
		metrics := fmt.Sprintf("127.0.0.1:%d", ports[0])
		dir, err := os.MkdirTemp("", "ep") // unix socket paths must stay short
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		for _, d := range []string{"dp", "cache"} {
			if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
				t.Fatal(err)
			}
		}
		p := startProbe(t, ctx, "probe-vgpu-device-plugin", framework.BinDevicePlugin, "http://"+metrics+"/metrics", []string{
			"--node-name=endpoint-probe-node", "--nvml=mock:dgxa100", "--kubeconfig=" + cluster.Kubeconfig,
			"--kubelet-socket-dir=" + filepath.Join(dir, "dp"), "--cache-dir=" + filepath.Join(dir, "cache"),
			"--libvgpu-host-path=" + filepath.Join(dir, "libvgpu.so"), "--metrics-address=" + metrics, "-v=2",
		}, nil)
		if diff := cmp.Diff([]string{"/metrics 200"}, served(t, ctx, "http://"+metrics)); diff != "" {
			t.Errorf("--metrics-address %s serves (-want +got):\n%s", metrics, diff)
		}
		sock := filepath.Join(dir, "dp", "volcano-vgpu.sock")
		want := []string{"tcp " + metrics, "unix " + sock}
		if diff := cmp.Diff(want, listeners(t, p)); diff != "" {
			t.Errorf("listeners (-want +got):\n%s", diff)
		}
		for path, mode := range map[string]os.FileMode{
			sock: os.ModeSocket | 0o600,
			filepath.Join(dir, "cache", "containers"):    os.ModeDir | 0o700,
			filepath.Join(dir, "cache", "ld.so.preload"): 0o644,
		} {
			fi, err := os.Lstat(path)
			if err != nil {
				t.Error(err)
			} else if got := fi.Mode() & (os.ModeType | os.ModePerm); got != mode {
				t.Errorf("%s: mode %v, want %v", path, got, mode)
			}
		}
	})

	t.Run("agent without --metrics-address", func(t *testing.T) {
		// The harness's agents run with --metrics-address= (no exporter):
		// their only listener is the device-plugin socket.
		n := cluster.Nodes()[0]
		want := []string{"unix " + filepath.Join(n.Dir, "dp", "volcano-vgpu.sock")}
		if diff := cmp.Diff(want, listeners(t, n.Agent)); diff != "" {
			t.Errorf("%s's agent listeners (-want +got):\n%s", n.Name, diff)
		}
	})
}
