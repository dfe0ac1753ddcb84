//go:build e2e

// Package runc starts OCI containers with runc for the node-side end-to-end
// tests: what a kubelet and containerd do with a device plugin's Allocate
// answer, without an image registry. A container's root filesystem is built
// from host files (a test workload and the shared libraries it needs, found
// with ldd) and the answer's mounts, environment and device nodes become its
// OCI runtime spec (github.com/opencontainers/runtime-spec, config.md), as
// the kubelet's container manager and containerd's CRI plugin compose them.
// The container gets its own PID, mount, IPC and UTS namespaces and a fresh
// /proc, like a pod's container.
package runc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Mount is a bind mount from the host into the container.
type Mount struct {
	Host, Container string
	ReadOnly        bool
}

// Spec is what a container is made of.
type Spec struct {
	// ID names the container for runc; unique per Runtime.
	ID string
	// Args is the process to run; Args[0] must be among Files.
	Args []string
	// Env is the process's environment, "K=V".
	Env []string
	// Mounts are bind mounts (the Allocate answer's, the driver socket).
	Mounts []Mount
	// Files are host files copied into the root filesystem at the same
	// path; executables and shared objects bring their ldd closure.
	Files []string
	// Copies are host files copied to another path in the root filesystem
	// (libraries a container runtime hook would inject), closure included.
	Copies []Mount
	// Devices are device nodes the container may use (Allocate's
	// DeviceSpecs); those missing on the host are left out.
	Devices []string
}

// Runtime runs containers with one runc state root and bundle directory.
type Runtime struct {
	binary string
	root   string // runc --root: container state
	dir    string // bundles
}

// ErrNoRunc is returned by New when runc is not installed.
var ErrNoRunc = errors.New("runc not found on PATH (apt-get install runc)")

// New finds runc and prepares dir for state and bundles.
func New(dir string) (*Runtime, error) {
	bin, err := exec.LookPath("runc")
	if err != nil {
		// Debian installs it in /usr/sbin, which a user's PATH may lack.
		if _, serr := os.Stat("/usr/sbin/runc"); serr != nil {
			return nil, fmt.Errorf("%w: %w", ErrNoRunc, err)
		}
		bin = "/usr/sbin/runc"
	}
	r := &Runtime{binary: bin, root: filepath.Join(dir, "state"), dir: filepath.Join(dir, "bundles")}
	for _, d := range []string{r.root, r.dir} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("runc directory %s: %w", d, err)
		}
	}
	return r, nil
}

// Container is a started container.
type Container struct {
	ID     string
	rt     *Runtime
	cmd    *exec.Cmd
	out    lockedBuffer
	errOut lockedBuffer
	done   chan struct{}
	exit   int
	err    error
}

// WriteBundle makes an OCI bundle of s in the directory bundle, replacing
// what was there: the root filesystem (rootfs/) and config.json, what Start
// runs. Another runtime can create containers from it (a runc wrapper such
// as the NVIDIA container toolkit's, run as containerd runs it).
func WriteBundle(bundle string, s Spec) error {
	if err := os.RemoveAll(bundle); err != nil {
		return fmt.Errorf("clear bundle: %w", err)
	}
	rootfs := filepath.Join(bundle, "rootfs")
	if err := buildRootfs(rootfs, s); err != nil {
		return fmt.Errorf("root filesystem: %w", err)
	}
	cfg, err := json.MarshalIndent(ociConfig(s), "", " ")
	if err != nil {
		return fmt.Errorf("spec: %w", err)
	}
	if err := os.WriteFile(filepath.Join(bundle, "config.json"), cfg, 0o600); err != nil {
		return fmt.Errorf("write spec: %w", err)
	}
	return nil
}

// Start builds the bundle and runs the container in the background (runc
// run, which stays its parent and reports its exit status).
func (r *Runtime) Start(ctx context.Context, s Spec) (*Container, error) {
	bundle := filepath.Join(r.dir, s.ID)
	if err := WriteBundle(bundle, s); err != nil {
		return nil, fmt.Errorf("container %s: %w", s.ID, err)
	}
	c := &Container{ID: s.ID, rt: r, done: make(chan struct{})}
	c.cmd = exec.Command(r.binary, "--root", r.root, "run", "--bundle", bundle, s.ID)
	c.cmd.Stdout, c.cmd.Stderr = &c.out, &c.errOut
	c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := c.cmd.Start(); err != nil {
		return nil, fmt.Errorf("container %s: runc run: %w", s.ID, err)
	}
	go func() {
		err := c.cmd.Wait()
		c.exit = c.cmd.ProcessState.ExitCode()
		var ee *exec.ExitError
		if err != nil && !errors.As(err, &ee) {
			c.err = err
		}
		close(c.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = c.Kill(syscall.SIGKILL)
		case <-c.done:
		}
	}()
	return c, nil
}

// Wait waits for the container to exit and returns its exit status
// (128+signal when a signal ended it, as runc reports it).
func (c *Container) Wait(ctx context.Context) (int, error) {
	select {
	case <-c.done:
		return c.exit, c.err
	case <-ctx.Done():
		return -1, fmt.Errorf("container %s: %w", c.ID, ctx.Err())
	}
}

// Done is closed when the container has exited.
func (c *Container) Done() <-chan struct{} { return c.done }

// Stdout and Stderr are what the container's process wrote so far.
func (c *Container) Stdout() string { return c.out.String() }
func (c *Container) Stderr() string { return c.errOut.String() }

// Pid is the host pid of the container's first process (runc state).
func (c *Container) Pid() (int, error) {
	out, err := exec.Command(c.rt.binary, "--root", c.rt.root, "state", c.ID).Output()
	if err != nil {
		return 0, fmt.Errorf("container %s: runc state: %w", c.ID, err)
	}
	var st struct {
		Pid    int    `json:"pid"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		return 0, fmt.Errorf("container %s: runc state: %w", c.ID, err)
	}
	if st.Pid <= 0 {
		return 0, fmt.Errorf("container %s: no process (status %s)", c.ID, st.Status)
	}
	return st.Pid, nil
}

// Kill sends sig to every process of the container.
func (c *Container) Kill(sig syscall.Signal) error {
	select {
	case <-c.done:
		return nil
	default:
	}
	out, err := exec.Command(c.rt.binary, "--root", c.rt.root, "kill", "--all", c.ID,
		fmt.Sprint(int(sig))).CombinedOutput()
	if err != nil {
		return fmt.Errorf("container %s: runc kill: %w: %s", c.ID, err, bytes.TrimSpace(out))
	}
	return nil
}

// Delete kills the container if it still runs, waits for it and removes
// its state and bundle.
func (c *Container) Delete() error {
	_ = c.Kill(syscall.SIGKILL)
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("container %s: did not exit after SIGKILL", c.ID)
	}
	out, err := exec.Command(c.rt.binary, "--root", c.rt.root, "delete", "--force", c.ID).CombinedOutput()
	if err != nil && !strings.Contains(string(out), "does not exist") {
		return fmt.Errorf("container %s: runc delete: %w: %s", c.ID, err, bytes.TrimSpace(out))
	}
	return os.RemoveAll(filepath.Join(c.rt.dir, c.ID))
}

// lockedBuffer is a bytes.Buffer safe for runc's writer and the test's reader.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
