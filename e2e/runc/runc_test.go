//go:build e2e

package runc

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/vgpushare/vshare/internal/testroot"
)

// buildProbe compiles testdata/probe.c into dir.
func buildProbe(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "probe")
	if out, err := exec.Command("cc", "-O2", "-o", bin, "testdata/probe.c").CombinedOutput(); err != nil {
		t.Fatalf("compile probe: %v\n%s", err, out)
	}
	return bin
}

func newRuntime(t *testing.T) *Runtime {
	t.Helper()
	testroot.Require(t, "runc starts containers")
	rt, err := New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// The container's process runs in its own pid namespace with its own /proc,
// gets the environment and mounts of its spec, and its exit status comes back.
func TestRunsWhatTheSpecSays(t *testing.T) {
	rt := newRuntime(t)
	dir := t.TempDir()
	probe := buildProbe(t, dir)
	data := filepath.Join(dir, "data")
	if err := os.Mkdir(data, 0o777); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "probe.txt")
	if err := os.WriteFile(file, []byte("mounted\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rt.Start(ctx, Spec{
		ID: "probe-exit", Args: []string{probe, "exit"}, Env: []string{"PROBE_VALUE=42"},
		Files:   []string{probe},
		Mounts:  []Mount{{Host: file, Container: "/etc/probe.txt", ReadOnly: true}, {Host: data, Container: "/data"}},
		Devices: []string{"/dev/nvidia0", "/dev/zero"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete()
	code, err := c.Wait(ctx)
	if err != nil || code != 7 {
		t.Fatalf("exit %d, %v; stderr:\n%s", code, err, c.Stderr())
	}
	out := c.Stdout()
	for _, want := range []string{"nspid=1\n", "pid=1\n", "env=42\n", "file=mounted\n", "write=ok\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	if b, err := os.ReadFile(filepath.Join(data, "out.txt")); err != nil || string(b) != "written\n" {
		t.Errorf("the container's write to the mounted directory: %q, %v", b, err)
	}
}

// A running container has a host pid other than 1; a signal ends it.
func TestHostPidAndKill(t *testing.T) {
	rt := newRuntime(t)
	dir := t.TempDir()
	probe := buildProbe(t, dir)
	data := filepath.Join(dir, "data")
	file := filepath.Join(dir, "probe.txt")
	if err := os.Mkdir(data, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := rt.Start(ctx, Spec{ID: "probe-wait", Args: []string{probe}, Files: []string{probe},
		Mounts: []Mount{{Host: file, Container: "/etc/probe.txt"}, {Host: data, Container: "/data"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Delete()
	var pid int
	for deadline := time.Now().Add(30 * time.Second); ; {
		if pid, err = c.Pid(); err == nil && strings.Contains(c.Stdout(), "write=") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("container did not start: %v; stderr:\n%s", err, c.Stderr())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pid <= 1 || pid == os.Getpid() {
		t.Errorf("host pid %d", pid)
	}
	if err := c.Kill(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if code, _ := c.Wait(ctx); code != 128+int(syscall.SIGKILL) {
		t.Errorf("exit %d after SIGKILL, want %d", code, 128+int(syscall.SIGKILL))
	}
}
