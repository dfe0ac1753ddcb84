package main

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// buildPause builds this command into a temporary directory.
func buildPause(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "pause")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestExitsZeroOnSignal: SIGTERM and SIGINT end pause with status 0, as
// pause.c's sigdown does; not being pid 1, it warns first.
func TestExitsZeroOnSignal(t *testing.T) {
	bin := buildPause(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		t.Run(sig.String(), func(t *testing.T) {
			cmd := exec.Command(bin)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			r := bufio.NewReader(stderr)
			line, err := r.ReadString('\n')
			if err != nil || line != "Warning: pause should be the first process\n" {
				t.Fatalf("first line %q (%v), want the warning", line, err)
			}
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			rest, _ := r.ReadString('\n')
			if err := cmd.Wait(); err != nil {
				t.Fatalf("after %v: %v (%q), want status 0", sig, err, rest)
			}
			if !strings.HasPrefix(rest, "Shutting down, got signal") {
				t.Errorf("last line %q", rest)
			}
		})
	}
}

// TestReapsOrphansAsPID1 runs pause as pid 1 of a new PID namespace (in a
// user namespace, so root is not needed where unprivileged user namespaces
// are allowed), leaves an orphan in that namespace with nsenter (a shell
// that backgrounds a sleep and exits), and wants pause to reap the orphan
// once it exits, not keep it as a zombie; then SIGTERM ends pause with 0.
func TestReapsOrphansAsPID1(t *testing.T) {
	bin := buildPause(t)
	cmd := exec.Command(bin)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWPID | syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getuid(), Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: os.Getgid(), Size: 1}},
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start pause in new user and PID namespaces (needs root or unprivileged user namespaces): %v", err)
	}
	defer cmd.Process.Kill()
	pid := cmd.Process.Pid

	enter := exec.Command("nsenter", "--target", strconv.Itoa(pid), "--user", "--pid", "--",
		// The orphan lets go of nsenter's output pipe: with it, nsenter's
		// output would end only when the orphan exits, and the orphan would
		// be gone (reaped at once) before the test could see pause adopt it.
		"/bin/sh", "-c", "sleep 2 >/dev/null 2>&1 & exit 0")
	if out, err := enter.CombinedOutput(); err != nil {
		t.Fatalf("nsenter into pause's namespaces: %v\n%s", err, out)
	}
	orphan := waitFor(t, "pause to adopt the orphan", func() (string, bool) {
		kids := children(t, pid)
		return strings.Join(kids, ","), len(kids) == 1
	})
	waitFor(t, "the orphan "+orphan+" to be reaped after it exits", func() (string, bool) {
		state, err := os.ReadFile("/proc/" + orphan + "/stat")
		if errors.Is(err, os.ErrNotExist) {
			return "", true
		}
		return string(state), false
	})

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("pause as pid 1 after SIGTERM: %v, want status 0", err)
	}
}

// children lists a process's children (host pids) from /proc.
func children(t *testing.T, pid int) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + strconv.Itoa(pid) + "/children")
	if err != nil {
		t.Fatalf("children of pause: %v", err)
	}
	return strings.Fields(string(data))
}

// waitFor polls cond every 10 ms for up to 10 s, failing with what cond
// last saw.
func waitFor(t *testing.T, what string, cond func() (string, bool)) string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		seen, ok := cond()
		if ok {
			return seen
		}
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s; last seen: %q", what, seen)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
