//go:build e2e

package framework

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// stopGrace is how long a child gets between SIGTERM and SIGKILL.
const stopGrace = 10 * time.Second

// Process is one child of the harness. Its output goes to LogPath.
type Process struct {
	Name    string
	LogPath string

	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // valid after done
}

// startProcess starts bin in its own process group, with SIGKILL as its
// parent-death signal so a crashed harness leaves nothing behind. (Linux sends
// it when the forking OS thread exits; the Go runtime only retires threads
// whose goroutine exits while locked to them, which the harness never does.)
func startProcess(logDir, name, bin string, args, env []string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return nil, fmt.Errorf("create log for %s: %w", name, err)
	}
	fmt.Fprintf(f, "# %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, LogPath: logPath, cmd: cmd, log: f, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended, and how.
func (p *Process) Exited() (bool, error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, errors.New("exited with status 0")
		}
		return true, p.err
	default:
		return false, nil
	}
}

// Stop sends SIGTERM to the process group, then SIGKILL after stopGrace.
// It is safe to call more than once.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// Kill sends SIGKILL to the process group and waits for the exit: a crash,
// not a shutdown.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// Tail returns the last n lines of the process's log.
func (p *Process) Tail(n int) string {
	data, err := os.ReadFile(p.LogPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.LogPath, err)
	}
	lines := bytes.Split(bytes.TrimRight(data, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// freePorts returns n distinct free TCP ports on 127.0.0.1. The listeners are
// held until all ports are picked so no port is returned twice; another
// process may still take one before the child binds it, which is rare enough
// on a test machine to surface as a start-up failure with the log shown.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
