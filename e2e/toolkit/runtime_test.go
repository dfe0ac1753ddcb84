package toolkit

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

func TestArgs(t *testing.T) {
	tests := []struct {
		args       []string
		create     bool
		bundle     string
		log        string
		logAsJSON  bool
		bundleFail bool
	}{
		{args: []string{"--root", "/run/r", "--log", "/b/log.json", "--log-format", "json", "create", "--bundle", "/b", "--pid-file", "/b/pid", "c1"},
			create: true, bundle: "/b", log: "/b/log.json", logAsJSON: true},
		{args: []string{"--log=/l", "create", "-b=/x", "c1"}, create: true, bundle: "/x", log: "/l"},
		{args: []string{"create", "-bundle", "/y", "c1"}, create: true, bundle: "/y"},
		{args: []string{"create", "c1"}, create: true, bundle: "/cwd"},
		{args: []string{"start", "c1"}, bundle: "/cwd"},
		{args: []string{"run", "--bundle", "/r", "c1"}, bundle: "/r"},
		{args: []string{"delete", "--bundle", "create", "c1"}, bundle: "create"},
		{args: []string{"--bundle", "create", "start"}, bundle: "create"},
		{args: []string{"create", "--bundle"}, create: true, bundleFail: true},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			if got := HasCreateSubcommand(tc.args); got != tc.create {
				t.Errorf("HasCreateSubcommand = %v, want %v", got, tc.create)
			}
			bundle, err := BundleDir(tc.args, "/cwd")
			if (err != nil) != tc.bundleFail || (!tc.bundleFail && bundle != tc.bundle) {
				t.Errorf("BundleDir = %q, %v; want %q (error: %v)", bundle, err, tc.bundle, tc.bundleFail)
			}
			if log, asJSON := LogFile(tc.args); log != tc.log || asJSON != tc.logAsJSON {
				t.Errorf("LogFile = %q, %v; want %q, %v", log, asJSON, tc.log, tc.logAsJSON)
			}
		})
	}
}

func TestConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if got := ConfigPath(env(nil)); got != "/etc/nvidia-container-runtime/config.toml" {
		t.Errorf("ConfigPath without XDG_CONFIG_HOME = %s", got)
	}
	if got := ConfigPath(env(map[string]string{"XDG_CONFIG_HOME": "/x"})); got != "/x/nvidia-container-runtime/config.toml" {
		t.Errorf("ConfigPath with XDG_CONFIG_HOME = %s", got)
	}
	fsys := fstest.MapFS{
		"etc/good.toml": {Data: []byte(`
# A config.toml as the real toolkit writes it, plus the fake driver.
disable-require = false
supported-driver-capabilities = "utility, compute"
[nvidia-container-cli]
ldconfig = "@/sbin/ldconfig.real"
[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["/usr/sbin/runc"]
[fake-driver]
device-dir = "/run/fakegpu"
library-dir = "/opt/stub"
`)},
		"etc/relative.toml": {Data: []byte("[fake-driver]\ndevice-dir = \"run/fakegpu\"\n")},
		"etc/badcap.toml":   {Data: []byte("supported-driver-capabilities = \"compute,teleport\"\n")},
		"etc/broken.toml":   {Data: []byte("[fake-driver\n")},
	}
	got, err := LoadConfig(fsys, "/etc/good.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Config{SupportedDriverCapabilities: "utility, compute", Runtime: RuntimeConfig{Runtimes: []string{"/usr/sbin/runc"}},
		FakeDriver: FakeDriverConfig{DeviceDir: "/run/fakegpu", LibraryDir: "/opt/stub", ContainerLibraryDir: DefaultContainerLibraryDir}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	missing, err := LoadConfig(fsys, "/etc/none.toml")
	if err != nil || missing.Runtime.Runtimes[1] != "runc" || missing.FakeDriver.DeviceDir != "" ||
		missing.SupportedDriverCapabilities != "compat32,compute,display,graphics,ngx,utility,video" {
		t.Errorf("missing file: %+v, %v; want the defaults", missing, err)
	}
	for file, wantErr := range map[string]string{"relative": `fake-driver.device-dir "run/fakegpu": want an absolute path`,
		"badcap": `capability "teleport"`, "broken": "parse config"} {
		if _, err := LoadConfig(fsys, "/etc/"+file+".toml"); err == nil || !strings.Contains(err.Error(), wantErr) {
			t.Errorf("%s: error %v, want one containing %q", file, err, wantErr)
		}
	}
}

// writeBundle writes a bundle whose spec's process has env.
func writeBundle(t *testing.T, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	b, err := json.Marshal(&specs.Spec{Version: "1.0.2", Process: &specs.Process{Args: []string{"/probe"}, Env: env},
		Root: &specs.Root{Path: "rootfs"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o640); err != nil {
		t.Fatal(err)
	}
	return dir
}

func readSpec(t *testing.T, bundle string) specs.Spec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(bundle, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s specs.Spec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatal(err)
	}
	return s
}

// Prepare edits the bundle on create only, asks the driver for its cards
// only when the container asks for it, and names the low-level runtime.
func TestPrepare(t *testing.T) {
	runc := filepath.Join(t.TempDir(), "runc")
	if err := os.WriteFile(runc, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := testConfig
	cfg.Runtime.Runtimes = []string{"no-such-runtime", "/nonexistent/runc", runc}
	listed := 0
	list := func(socket string) ([]fakedriver.Card, error) {
		if socket != "/run/fakegpu/nvidiactl" {
			t.Errorf("cards asked of %s, want the control node", socket)
		}
		listed++
		return testCards(), nil
	}
	gpu := writeBundle(t, "NVIDIA_VISIBLE_DEVICES=2")
	for _, args := range [][]string{{"start", "c1"}, {"run", "--bundle", gpu, "c1"}} {
		r := &Runtime{Args: args, Config: cfg, Cwd: gpu, ListCards: list}
		if rt, err := r.Prepare(); err != nil || rt != runc {
			t.Fatalf("%v: %s, %v", args, rt, err)
		}
	}
	if s := readSpec(t, gpu); len(s.Mounts) != 0 || listed != 0 {
		t.Fatalf("start and run changed the spec (%v) or asked for the cards (%d times)", s.Mounts, listed)
	}
	r := &Runtime{Args: []string{"--root", "/r", "create", "--bundle", gpu, "c1"}, Config: cfg, ListCards: list}
	if rt, err := r.Prepare(); err != nil || rt != runc {
		t.Fatalf("create: %s, %v", rt, err)
	}
	if diff := cmp.Diff([]specs.Mount{ctl, nvml, cuda, uvm, card7}, readSpec(t, gpu).Mounts); diff != "" {
		t.Errorf("created spec's mounts (-want +got):\n%s", diff)
	}
	if fi, _ := os.Stat(filepath.Join(gpu, "config.json")); fi.Mode().Perm() != 0o640 {
		t.Errorf("config.json mode %v, want the bundle's 0640 kept", fi.Mode().Perm())
	}
	// A container that asks for nothing needs no driver at all.
	plain := writeBundle(t, "PATH=/bin")
	r = &Runtime{Args: []string{"create", "c2"}, Config: cfg, Cwd: plain,
		ListCards: func(string) ([]fakedriver.Card, error) { return nil, errors.New("no driver") }}
	if _, err := r.Prepare(); err != nil {
		t.Errorf("create without GPUs and without a driver: %v", err)
	}
	// Failures: the driver down, an unknown device, no runtime.
	down := &Runtime{Args: []string{"create", "c3"}, Config: cfg, Cwd: writeBundle(t, "NVIDIA_VISIBLE_DEVICES=0"),
		ListCards: func(string) ([]fakedriver.Card, error) { return nil, errors.New("connection refused") }}
	if _, err := down.Prepare(); err == nil || !strings.Contains(err.Error(), "list the GPUs: connection refused") {
		t.Errorf("driver down: %v", err)
	}
	unknown := &Runtime{Args: []string{"create", "c4"}, Config: cfg, Cwd: writeBundle(t, "NVIDIA_VISIBLE_DEVICES=9"), ListCards: list}
	if _, err := unknown.Prepare(); err == nil || !strings.Contains(err.Error(), "9: unknown device") {
		t.Errorf("unknown device: %v", err)
	}
	cfg.Runtime.Runtimes = []string{"no-such-runtime"}
	if _, err := (&Runtime{Args: []string{"start", "c1"}, Config: cfg}).Prepare(); err == nil {
		t.Error("no low-level runtime: no error")
	}
}

// ReportError writes runc's JSON log line, where containerd reads it.
func TestReportError(t *testing.T) {
	log := filepath.Join(t.TempDir(), "log.json")
	ReportError([]string{"--log", log, "--log-format", "json", "create", "c1"}, errors.New("0: unknown device"),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var line map[string]string
	if err := json.Unmarshal(b, &line); err != nil {
		t.Fatalf("log %q: %v", b, err)
	}
	want := map[string]string{"level": "error", "msg": "nvidia-container-runtime: 0: unknown device", "time": "2026-01-02T03:04:05Z"}
	if diff := cmp.Diff(want, line); diff != "" {
		t.Errorf("log line (-want +got):\n%s", diff)
	}
}
