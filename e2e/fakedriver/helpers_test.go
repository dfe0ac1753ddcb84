package fakedriver_test

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// Environment of a helper child: the test binary re-executed in a mode.
const (
	envHelper = "FAKEDRIVER_TEST_HELPER" // mode: hold, spin, self
	envSocket = "FAKEDRIVER_TEST_SOCKET"
	envBytes  = "FAKEDRIVER_TEST_BYTES"
	// envHostBytes: hold also pins that much host memory for device 0.
	envHostBytes = "FAKEDRIVER_TEST_HOST_BYTES"
	envExport    = "FAKEDRIVER_TEST_EXPORT" // the export an "import" helper opens
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(envHelper); mode != "" {
		if err := runHelper(mode, os.Getenv(envSocket)); err != nil {
			fmt.Fprintln(os.Stderr, "helper:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// runHelper is a child process speaking to the driver as a CUDA process
// would. It exits when its stdin closes, so a failed test leaves no
// spinning children behind.
//
//	hold: a context on device 0, $FAKEDRIVER_TEST_BYTES allocated, 10 s of
//	      work queued, $FAKEDRIVER_TEST_HOST_BYTES of host memory pinned
//	      for device 0 if set; prints "ready", then blocks in a LAUNCH.
//	spin: prints "ready", waits for a line on stdin, then launches
//	      spinLaunch back to back.
//	self: prints "<getpid> <SELF response>" and exits.
//	nodes: sets up a /dev and root of its own (runNodesHelper), then
//	       prints the answer to each request of $FAKEDRIVER_TEST_REQUESTS.
func runHelper(mode, socket string) error {
	if mode == "nodes" {
		return runNodesHelper(socket)
	}
	c, err := net.Dial("unix", socket)
	if err != nil {
		return fmt.Errorf("connect %s: %w", socket, err)
	}
	r := bufio.NewReader(c)
	do := func(req string) (string, error) {
		if _, err := fmt.Fprintf(c, "%s\n", req); err != nil {
			return "", fmt.Errorf("send %s: %w", req, err)
		}
		resp, err := r.ReadString('\n')
		if err != nil {
			return "", fmt.Errorf("read answer to %s: %w", req, err)
		}
		return strings.TrimSuffix(resp, "\n"), nil
	}
	stdin := bufio.NewReader(os.Stdin)
	switch mode {
	case "self":
		resp, err := do("SELF")
		fmt.Println(os.Getpid(), resp)
		return err
	case "hold":
		reqs := []string{"CTX 0 1", "ALLOC 0 " + os.Getenv(envBytes), "LAUNCH 0 10000000000"}
		if host := os.Getenv(envHostBytes); host != "" {
			reqs = append(reqs, "HOSTALLOC 0 "+host)
		}
		for _, req := range reqs {
			if resp, err := do(req); err != nil || resp != "OK" {
				return fmt.Errorf("%s: %q, %v", req, resp, err)
			}
		}
		fmt.Println("ready")
		go exitOnEOF(stdin)
		_, err := do("LAUNCH 0 1")
		return err
	case "import":
		return runImportHelper(do, stdin)
	case "spin":
		fmt.Println("ready")
		if _, err := stdin.ReadString('\n'); err != nil {
			return nil
		}
		go exitOnEOF(stdin)
		for {
			if resp, err := do(spinLaunch); err != nil || resp != "OK" {
				return fmt.Errorf("LAUNCH: %q, %v", resp, err)
			}
		}
	}
	return fmt.Errorf("unknown helper mode %q", mode)
}

// spinLaunch is the kernel a spinning client launches back to back. At
// 20 ms, a client held back at 4 ms queued still has 16 ms of work ahead
// when it is let go, so even on a loaded CI host it sends the next launch
// before its queue runs dry and the device stays busy.
const spinLaunch = "LAUNCH 0 20000000"

// exitOnEOF ends the helper when the test closes its stdin or dies.
func exitOnEOF(r io.Reader) {
	_, _ = io.Copy(io.Discard, r)
	os.Exit(0)
}

// child is a running helper process.
type child struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	out   *bufio.Reader
}

// helperCmd returns the command running the test binary in helper mode.
func helperCmd(t *testing.T, mode, socket string, env ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("find test binary: %v", err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envHelper+"="+mode, envSocket+"="+socket,
		// Under -race a child that exits would otherwise sleep a second.
		"GORACE="+strings.TrimSpace(os.Getenv("GORACE")+" atexit_sleep_ms=0"))
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	return cmd
}

// startChild starts a helper and waits for its "ready".
func startChild(t *testing.T, mode, socket string, env ...string) *child {
	t.Helper()
	cmd := helperCmd(t, mode, socket, env...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start helper %s: %v", mode, err)
	}
	ch := &child{cmd: cmd, stdin: stdin, out: bufio.NewReader(stdout)}
	t.Cleanup(ch.kill)
	if line, err := ch.out.ReadString('\n'); err != nil || line != "ready\n" {
		t.Fatalf("helper %s: got %q, %v; want ready", mode, line, err)
	}
	return ch
}

// pid returns the child's host pid.
func (c *child) pid() int { return c.cmd.Process.Pid }

// kill SIGKILLs the child and reaps it; calling it again does nothing.
func (c *child) kill() {
	if c.cmd.ProcessState != nil {
		return
	}
	_ = c.cmd.Process.Kill()
	_ = c.stdin.Close()
	_ = c.cmd.Wait()
}

// client speaks the protocol over one connection: to the driver, one
// process (the test's own pid).
type client struct {
	c net.Conn
	r *bufio.Reader
}

// dial connects to the driver.
func dial(t *testing.T, path string) *client {
	t.Helper()
	c, err := net.Dial("unix", path)
	if err != nil {
		t.Fatalf("connect to %s: %v", path, err)
	}
	t.Cleanup(func() { c.Close() })
	return &client{c: c, r: bufio.NewReader(c)}
}

// try sends one request and returns the response line without its
// newline. Safe to use from any goroutine.
func (c *client) try(req string) (string, error) {
	if _, err := io.WriteString(c.c, req+"\n"); err != nil {
		return "", fmt.Errorf("send %q: %w", req, err)
	}
	resp, err := c.r.ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("read answer to %q: %w", req, err)
	}
	return strings.TrimSuffix(resp, "\n"), nil
}

// do sends one request and fails the test on a transport error.
func (c *client) do(t *testing.T, req string) string {
	t.Helper()
	resp, err := c.try(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// expect sends one request and fails the test unless the answer is want.
func (c *client) expect(t *testing.T, req, want string) {
	t.Helper()
	if got := c.do(t, req); got != want {
		t.Fatalf("%s: got %q, want %q", req, got, want)
	}
}

// number sends a request answered "OK <n>" and returns n.
func (c *client) number(t *testing.T, req string) uint64 {
	t.Helper()
	resp := c.do(t, req)
	n, err := strconv.ParseUint(strings.TrimPrefix(resp, "OK "), 10, 64)
	if err != nil || !strings.HasPrefix(resp, "OK ") {
		t.Fatalf("%s: got %q, want OK <number>", req, resp)
	}
	return n
}

// eventually polls cond every 5 ms until it holds, failing the test after
// the deadline with cond's last explanation.
func eventually(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, why := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not after %v: %s", timeout, why)
		}
		<-tick.C
	}
}

// Sizes of the devices of startDriver.
const (
	gib     = uint64(1) << 30
	dev0Mem = 4 * gib
	dev1Mem = 2 * gib
	waveNS  = 250000
)

// startDriver starts a driver with two devices on a socket in a temporary
// directory and closes it at the end of the test.
func startDriver(t *testing.T, mutate ...func(*fakedriver.Config)) *fakedriver.Driver {
	t.Helper()
	cfg := fakedriver.Config{
		Devices: []fakedriver.Device{
			{UUID: "GPU-00000000-0000-0000-0000-000000000000", TotalBytes: dev0Mem, SMs: 108, Name: "NVIDIA A100-SXM4-40GB"},
			{UUID: "GPU-11111111-1111-1111-1111-111111111111", TotalBytes: dev1Mem, SMs: 40, Name: "Tesla T4"},
		},
		WaveNS: waveNS,
	}
	for _, m := range mutate {
		m(&cfg)
	}
	dr, err := fakedriver.Start(filepath.Join(t.TempDir(), "driver.sock"), cfg)
	if err != nil {
		t.Fatalf("start driver: %v", err)
	}
	t.Cleanup(func() {
		if err := dr.Close(); err != nil {
			t.Errorf("close driver: %v", err)
		}
	})
	return dr
}
