//go:build e2e

package toolkit_test

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/vgpushare/vshare/e2e/fakedriver"
	"github.com/vgpushare/vshare/e2e/runc"
	"github.com/vgpushare/vshare/internal/testroot"
)

// node is a test node: the fake driver with device nodes, the stand-in
// runtime configured for it, runc, and the probe the containers run.
type node struct {
	driver         *fakedriver.Driver
	runtime, runc  string
	xdg, state     string
	probe, work    string
	files          []string // the stub libraries' own dependencies, for the root filesystem
	cards          []fakedriver.Device
	containerCount int
}

// hostPaths extracts the libraries ldd names.
var hostPaths = regexp.MustCompile(`(/[^ \t()]+)`)

// built are the binaries the tests share, built once (build).
var built struct {
	once                    sync.Once
	dir                     string
	runtime, probe, stubDir string
	err                     error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
	os.Exit(code)
}

// build compiles the stand-in and the probe and builds the stub, once.
func build(t *testing.T) (runtime, probe, stubDir string) {
	t.Helper()
	built.once.Do(func() {
		if built.dir, built.err = os.MkdirTemp("", "toolkit-e2e-"); built.err == nil {
			built.runtime, built.probe, built.stubDir, built.err = buildIn(built.dir)
		}
	})
	if built.err != nil {
		t.Fatal(built.err)
	}
	return built.runtime, built.probe, built.stubDir
}

// buildIn builds the binaries into dir.
func buildIn(dir string) (runtime, probe, stubDir string, err error) {
	root, err := filepath.Abs("../..")
	if err != nil {
		return "", "", "", err
	}
	runtime = filepath.Join(dir, "nvidia-container-runtime")
	cmd := exec.Command("go", "build", "-o", runtime, "./e2e/cmd/nvidia-container-runtime")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("build the runtime: %w\n%s", err, out)
	}
	if out, err := exec.Command("make", "-C", filepath.Join(root, "libvgpu"),
		"build/stub/libcuda.so.1", "build/stub/libnvidia-ml.so.1").CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("build the stub: %w\n%s", err, out)
	}
	probe = filepath.Join(dir, "probe")
	if out, err := exec.Command("cc", "-O2", "-Wall", "-Werror", "-o", probe, "testdata/probe.c", "-ldl").CombinedOutput(); err != nil {
		return "", "", "", fmt.Errorf("compile the probe: %w\n%s", err, out)
	}
	return runtime, probe, filepath.Join(root, "libvgpu", "build", "stub"), nil
}

// stubDependencies are the host libraries the stub libraries load (ldd),
// which a container's root filesystem must hold for them to load there.
func stubDependencies(t *testing.T, stubDir string) []string {
	t.Helper()
	seen := map[string]bool{}
	for _, lib := range []string{"libcuda.so.1", "libnvidia-ml.so.1"} {
		cmd := exec.Command("ldd", filepath.Join(stubDir, lib))
		cmd.Env = append(os.Environ(), "LD_LIBRARY_PATH="+stubDir)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("ldd %s: %v", lib, err)
		}
		for _, p := range hostPaths.FindAllString(string(out), -1) {
			if !strings.HasPrefix(p, stubDir) {
				seen[p] = true
			}
		}
	}
	var out []string
	for p := range seen {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// startNode starts the driver with three cards (minor numbers 0, 1, 7) and
// writes the stand-in's configuration where it looks for it.
func startNode(t *testing.T) *node {
	t.Helper()
	testroot.Require(t, "this test runs containers with runc")
	// Containers created with runc create outlive the command; their init
	// processes are reparented to the test process, which reaps them, as
	// containerd's shim does.
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatalf("become a child subreaper: %v", err)
	}
	dir := t.TempDir()
	n := &node{work: dir, xdg: filepath.Join(dir, "xdg"), state: filepath.Join(dir, "runc-state")}
	var stubDir string
	n.runtime, n.probe, stubDir = build(t)
	n.files = stubDependencies(t, stubDir)
	var err error
	if n.runc, err = exec.LookPath("runc"); err != nil {
		n.runc = "/usr/sbin/runc" // Debian's, which a user's PATH may lack
	}
	seven := 7
	one := 1
	n.cards = []fakedriver.Device{
		{UUID: "GPU-aaaaaaaa-0000-4000-8000-000000000000", TotalBytes: 1 << 34, SMs: 108, Name: "NVIDIA A100-SXM4-40GB"},
		{UUID: "GPU-bbbbbbbb-1111-4111-8111-111111111111", TotalBytes: 1 << 34, SMs: 108, Name: "NVIDIA A100-SXM4-40GB", Minor: &one},
		{UUID: "GPU-cccccccc-2222-4222-8222-222222222222", TotalBytes: 1 << 34, SMs: 108, Name: "NVIDIA A100-SXM4-40GB", Minor: &seven},
	}
	devDir := filepath.Join(dir, "fakegpu")
	if n.driver, err = fakedriver.StartDeviceNodes(devDir, fakedriver.Config{Devices: n.cards, WaveNS: 250000}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.driver.Close() })
	conf := fmt.Sprintf(`# The test node's toolkit stand-in.
[nvidia-container-runtime]
runtimes = [%q]

[fake-driver]
device-dir = %q
library-dir = %q
`, n.runc, devDir, stubDir)
	confDir := filepath.Join(n.xdg, "nvidia-container-runtime")
	if err := os.MkdirAll(confDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(confDir, "config.toml"), []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	return n
}

// outcome is what became of one container.
type outcome struct {
	out       []string // the probe's lines
	pid       int      // its host pid
	createErr string   // why create failed, as containerd would report it
}

// run creates and starts a container of the probe through the stand-in as
// containerd's runc shim does (create, then start, with runc's global
// flags and the configuration's location in the environment), waits for
// it and deletes it.
func (n *node) run(t *testing.T, env []string, args ...string) outcome {
	t.Helper()
	n.containerCount++
	id := fmt.Sprintf("probe-%d", n.containerCount)
	bundle := filepath.Join(n.work, "bundles", id)
	spec := runc.Spec{ID: id, Args: append([]string{"/probe"}, args...), Env: append([]string{"PATH=/bin"}, env...),
		Copies: []runc.Mount{{Host: n.probe, Container: "/probe"}}, Files: n.files}
	if err := runc.WriteBundle(bundle, spec); err != nil {
		t.Fatal(err)
	}
	stdout, err := os.Create(filepath.Join(n.work, id+".out"))
	if err != nil {
		t.Fatal(err)
	}
	defer stdout.Close()
	log, pidFile := filepath.Join(n.work, id+".log"), filepath.Join(n.work, id+".pid")
	runtime := func(args ...string) *exec.Cmd {
		cmd := exec.Command(n.runtime, append([]string{"--root", n.state, "--log", log, "--log-format", "json"}, args...)...)
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+n.xdg)
		return cmd
	}
	create := runtime("create", "--bundle", bundle, "--pid-file", pidFile, id)
	create.Stdout, create.Stderr = stdout, stdout
	if err := create.Run(); err != nil {
		b, _ := os.ReadFile(log)
		return outcome{createErr: string(b)}
	}
	defer func() {
		if out, err := exec.Command(n.runc, "--root", n.state, "delete", "--force", id).CombinedOutput(); err != nil {
			t.Errorf("runc delete %s: %v: %s", id, err, out)
		}
	}()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := runtime("start", id).CombinedOutput(); err != nil {
		t.Fatalf("start %s: %v: %s", id, err, out)
	}
	waitExit(t, pid)
	o := outcome{pid: pid}
	f, err := os.Open(stdout.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for s := bufio.NewScanner(f); s.Scan(); {
		o.out = append(o.out, s.Text())
	}
	return o
}

// waitExit reaps the container's init and fails unless it exited 0.
func waitExit(t *testing.T, pid int) {
	t.Helper()
	done := make(chan unix.WaitStatus, 1)
	go func() {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(pid, &ws, 0, nil); err != nil {
			t.Errorf("wait for the container's init %d: %v", pid, err)
		}
		done <- ws
	}()
	select {
	case ws := <-done:
		if !ws.Exited() || ws.ExitStatus() != 0 {
			t.Fatalf("container init %d: %v", pid, ws)
		}
	case <-time.After(2 * time.Minute):
		_ = unix.Kill(pid, unix.SIGKILL)
		t.Fatalf("container init %d did not exit", pid)
	}
}

// hexUUID is a "GPU-..." UUID as the probe prints cuDeviceGetUuid's bytes.
func hexUUID(u string) string {
	return strings.ReplaceAll(strings.TrimPrefix(u, "GPU-"), "-", "")
}

// A container run through the stand-in sees exactly the cards it was given:
// the stub lists the cards whose nodes it has, the driver refuses the
// others even when the container makes its own node or asks through its
// environment, and the driver's own record shows the container's process
// on the given cards only. A container that asks for nothing (unset,
// empty, void) gets no library and no node; an unknown card fails the
// create with the toolkit's error, in runc's log where containerd reads it.
func TestContainersGetExactlyTheirCards(t *testing.T) {
	n := startNode(t)
	u0, u1, u2 := n.cards[0].UUID, n.cards[1].UUID, n.cards[2].UUID
	nvml := func(i, rc int, u string) string { return fmt.Sprintf("nvml %d rc=%d uuid=%s", i, rc, u) }
	cuda := func(i int, u string) string { return fmt.Sprintf("cuda %d uuid=%s alloc=0", i, hexUUID(u)) }
	nothing := []string{"cuda_lib=0", "nvml_lib=0", "dev=", "done"}
	tests := []struct {
		name  string
		env   []string
		args  []string
		want  []string
		cards []int // the driver's cards the container's process used
	}{
		{name: "an index", env: []string{"NVIDIA_VISIBLE_DEVICES=1"}, cards: []int{1}, want: []string{
			"cuda_lib=1", "nvml_lib=1", "dev=nvidia-uvm,nvidia1,nvidiactl",
			"nvml_init=0 count=1", nvml(0, 0, u1), "cuda_init=0 count=1", cuda(0, u1), "done"}},
		{name: "a UUID and an index, in PCI order", env: []string{"NVIDIA_VISIBLE_DEVICES=" + u2 + ",0"}, cards: []int{0, 2}, want: []string{
			"cuda_lib=1", "nvml_lib=1", "dev=nvidia-uvm,nvidia0,nvidia7,nvidiactl",
			"nvml_init=0 count=2", nvml(0, 0, u0), nvml(1, 0, u2), "cuda_init=0 count=2", cuda(0, u0), cuda(1, u2), "done"}},
		{name: "all", env: []string{"NVIDIA_VISIBLE_DEVICES=all"}, cards: []int{0, 1, 2}, want: []string{
			"cuda_lib=1", "nvml_lib=1", "dev=nvidia-uvm,nvidia0,nvidia1,nvidia7,nvidiactl",
			"nvml_init=0 count=3", nvml(0, 0, u0), nvml(1, 0, u1), nvml(2, 0, u2),
			"cuda_init=0 count=3", cuda(0, u0), cuda(1, u1), cuda(2, u2), "done"}},
		{name: "NVML only", env: []string{"NVIDIA_VISIBLE_DEVICES=2", "NVIDIA_DRIVER_CAPABILITIES=utility"}, want: []string{
			"cuda_lib=0", "nvml_lib=1", "dev=nvidia7,nvidiactl", "nvml_init=0 count=1", nvml(0, 0, u2), "done"}},
		{name: "none: the libraries, no card", env: []string{"NVIDIA_VISIBLE_DEVICES=none"}, want: []string{
			"cuda_lib=1", "nvml_lib=1", "dev=nvidia-uvm,nvidiactl", "nvml_init=0 count=0", "cuda_init=100 count=0", "done"}},
		{name: "a node it makes itself is refused", env: []string{"NVIDIA_VISIBLE_DEVICES=0"}, args: []string{"forge=7"},
			cards: []int{0}, want: []string{
				"cuda_lib=1", "nvml_lib=1", "dev=nvidia-uvm,nvidia0,nvidia7,nvidiactl",
				"nvml_init=0 count=2", nvml(0, 0, u0), nvml(1, 4, ""), "cuda_init=0 count=1", cuda(0, u0), "done"}},
		{name: "its own environment gets it nothing more", env: []string{"NVIDIA_VISIBLE_DEVICES=1"}, args: []string{"setenv"},
			cards: []int{1}, want: []string{
				"cuda_lib=1", "nvml_lib=1", "dev=nvidia-uvm,nvidia1,nvidiactl",
				"nvml_init=0 count=3", nvml(0, 4, ""), nvml(1, 0, u1), nvml(2, 4, ""), "cuda_init=0 count=1", cuda(0, u1), "done"}},
		{name: "unset: nothing", want: nothing},
		{name: "empty: nothing", env: []string{"NVIDIA_VISIBLE_DEVICES="}, want: nothing},
		{name: "void: nothing", env: []string{"NVIDIA_VISIBLE_DEVICES=void"}, want: nothing},
	}
	pids := map[int][]int{} // card -> pids of containers that used it
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := n.run(t, tc.env, tc.args...)
			if o.createErr != "" {
				t.Fatalf("create failed: %s", o.createErr)
			}
			t.Logf("container (host pid %d) saw: %s", o.pid, strings.Join(o.out, " | "))
			if diff := cmp.Diff(tc.want, o.out); diff != "" {
				t.Errorf("what the container saw (-want +got):\n%s", diff)
			}
			for _, c := range tc.cards {
				pids[c] = append(pids[c], o.pid)
			}
		})
	}
	// The driver's truth: which containers' processes used each card.
	st := n.driver.Stats()
	for d, dev := range st.Devices {
		var got []int
		for _, p := range dev.Processes {
			got = append(got, p.Pid)
		}
		sort.Ints(got)
		want := pids[d]
		sort.Ints(want)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("card %d: pids the driver saw (-want +got):\n%s", d, diff)
		}
	}

	t.Run("an unknown UUID fails the create", func(t *testing.T) {
		o := n.run(t, []string{"NVIDIA_VISIBLE_DEVICES=0,GPU-dddddddd-3333-4333-8333-333333333333"})
		if !strings.Contains(o.createErr, `"level":"error"`) ||
			!strings.Contains(o.createErr, "GPU-dddddddd-3333-4333-8333-333333333333: unknown device") {
			t.Errorf("runc log %q, want the toolkit's unknown device error", o.createErr)
		}
		if out, err := exec.Command(n.runc, "--root", n.state, "state", fmt.Sprintf("probe-%d", n.containerCount)).CombinedOutput(); err == nil {
			t.Errorf("the container exists after a failed create: %s", out)
		}
	})
}
