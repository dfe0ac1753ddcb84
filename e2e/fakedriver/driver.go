package fakedriver

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/e2e/fakedriver/cards"
)

// Driver is a running fake driver daemon.
//
// Locking: the ground truth is in st, under st.mu; mu guards the set of
// open connections. Each connection has a goroutine reading it and one
// answering it (so a process's death is seen even while its LAUNCH or
// SYNC waits); the scheduler has one goroutine.
type Driver struct {
	path          string
	waveNS        uint64
	groupOf       func(pid int) string
	driverVersion string
	clk           clock.WithTicker
	st            *state
	events        *eventHub
	nodes         *nodes // nil: every connection is granted every card (Start)
	ln            *net.UnixListener
	closing       chan struct{}
	once          sync.Once
	wg            sync.WaitGroup

	mu    sync.Mutex
	conns map[*net.UnixConn]*conn
}

// conn is one open connection and the process it speaks for.
type conn struct {
	c *net.UnixConn
	p *process
	// ended is set, under st.mu, when the connection's end has been
	// counted (st.end): by its own goroutine, or earlier by reap.
	ended bool
}

// Start validates cfg, listens on socketPath (a Unix stream socket, mode
// 0666 so processes of any uid in any container can connect) and serves
// the protocol of PROTOCOL.md until Close. A stale socket left at
// socketPath by a daemon that died is replaced; a live one is an error.
//
// Such a driver has no device nodes: every connection may use every card,
// and a client shows a container the cards its NVIDIA_VISIBLE_DEVICES
// names (the stub's VGPU_STUB_DRIVER_SOCKET mode). StartDeviceNodes
// starts one that gates cards by device node, as on a real node.
func Start(socketPath string, cfg Config) (*Driver, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("start fake driver: %w", err)
	}
	return start(socketPath, cfg, nil)
}

// StartDeviceNodes starts a driver whose cards are reached through device
// nodes in dir, the way a container reaches the kernel driver's: the
// control socket dir/nvidiactl (ControlNode; the container's
// /dev/nvidiactl), dir/nvidia-uvm (UVMNode) and one node per card,
// dir/nvidia<minor> (CardNode). A request on a card is refused unless the
// caller's /dev/nvidia<minor> is that node (nodes.go), so a container
// reaches exactly the cards whose nodes its runtime gave it. Close removes
// the socket and the nodes.
func StartDeviceNodes(dir string, cfg Config) (*Driver, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("start fake driver: %w", err)
	}
	fs, _ := cards.Resolve(cfg.Devices)
	n, err := createNodes(dir, fs)
	if err != nil {
		return nil, fmt.Errorf("start fake driver: %w", err)
	}
	dr, err := start(filepath.Join(dir, ControlNode), cfg, n)
	if err != nil {
		n.remove()
		return nil, err
	}
	return dr, nil
}

// start serves the protocol on socketPath for a valid cfg, with the
// device nodes n (nil for none).
func start(socketPath string, cfg Config, n *nodes) (*Driver, error) {
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	if err := removeStale(socketPath); err != nil {
		return nil, fmt.Errorf("start fake driver: %w", err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketPath, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("start fake driver: listen on %s: %w", socketPath, err)
	}
	if err := os.Chmod(socketPath, 0o666); err != nil {
		ln.Close()
		return nil, fmt.Errorf("start fake driver: chmod %s: %w", socketPath, err)
	}
	version := cfg.DriverVersion
	if version == "" {
		version = DefaultDriverVersion
	}
	dr := &Driver{
		path:          socketPath,
		waveNS:        cfg.WaveNS,
		groupOf:       cfg.GroupOf,
		driverVersion: version,
		clk:           clk,
		st:            newState(cfg.Devices, clk.Now()),
		events:        newEventHub(),
		nodes:         n,
		ln:            ln,
		closing:       make(chan struct{}),
		conns:         make(map[*net.UnixConn]*conn),
	}
	// The ticker exists before Start returns, so a test stepping a fake
	// clock right after Start cannot step past it.
	ticker := clk.NewTicker(tick)
	dr.wg.Add(2)
	go func() {
		defer dr.wg.Done()
		defer ticker.Stop()
		dr.st.run(ticker, clk, dr.closing)
	}()
	go dr.accept()
	klog.V(2).InfoS("Fake GPU driver started", "socket", socketPath, "devices", len(cfg.Devices), "deviceNodes", n != nil)
	return dr, nil
}

// Path returns the socket's path.
func (dr *Driver) Path() string { return dr.path }

// Close stops the daemon: it closes every connection (their processes'
// memory is freed as if they had exited), stops the scheduler, waits for
// all goroutines and removes the socket.
func (dr *Driver) Close() error {
	var err error
	dr.once.Do(func() {
		close(dr.closing)
		if cerr := dr.ln.Close(); cerr != nil {
			err = fmt.Errorf("close fake driver: close listener: %w", cerr)
		}
		dr.mu.Lock()
		for c := range dr.conns {
			c.Close()
		}
		dr.mu.Unlock()
		dr.wg.Wait()
		if rerr := os.Remove(dr.path); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = fmt.Errorf("close fake driver: remove socket: %w", rerr)
		}
		if dr.nodes != nil {
			if nerr := dr.nodes.remove(); nerr != nil && err == nil {
				err = fmt.Errorf("close fake driver: %w", nerr)
			}
		}
		klog.V(2).InfoS("Fake GPU driver stopped", "socket", dr.path)
	})
	return err
}

// accept serves each new connection in its own goroutine until Close.
func (dr *Driver) accept() {
	defer dr.wg.Done()
	for {
		c, err := dr.ln.AcceptUnix()
		if err != nil {
			select {
			case <-dr.closing:
				return
			default:
			}
			// EMFILE and the like: let the host breathe, then go on.
			klog.ErrorS(err, "Fake GPU driver cannot accept a connection")
			select {
			case <-dr.closing:
				return
			case <-time.After(10 * time.Millisecond):
			}
			continue
		}
		if !dr.track(c) {
			c.Close()
			return
		}
		dr.wg.Add(1)
		go dr.serve(c)
	}
}

// track adds c to the open connections; false once Close has begun.
func (dr *Driver) track(c *net.UnixConn) bool {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	select {
	case <-dr.closing:
		return false
	default:
	}
	dr.conns[c] = &conn{c: c}
	return true
}

// untrack removes c from the open connections.
func (dr *Driver) untrack(c *net.UnixConn) {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	delete(dr.conns, c)
}

// reap counts the end of every connection whose peer has hung up but
// whose goroutine has not yet seen it.
//
// The kernel driver frees a process's memory while the process exits: the
// exit closes its files, the driver's release of its device file frees
// what it held, and only then does the parent's wait(2) return (exit(3),
// "the process's open file descriptors are closed"; the CUDA driver holds
// a process's allocations on those files). The daemon learns of an exit
// from its connection's EOF, which its goroutine may read after the
// parent, woken by the same exit, has already sent a request: without
// this, a test that SIGKILLs a process and allocates in its parent could
// see the dead process's memory still held, which no real driver shows.
// A hung-up peer is seen at once by poll(2) (POLLRDHUP/POLLHUP, unix(7):
// the kernel shuts the peer's socket down when its last descriptor is
// closed), so every request that reads or takes memory, and every reader
// of the ground truth, first reaps.
func (dr *Driver) reap() {
	dr.mu.Lock()
	defer dr.mu.Unlock()
	for _, cn := range dr.conns {
		if cn.p == nil || !hungUp(cn.c) {
			continue
		}
		dr.st.end(cn)
	}
}

// hungUp reports whether c's peer has closed its end.
func hungUp(c *net.UnixConn) bool {
	raw, err := c.SyscallConn()
	if err != nil {
		return false
	}
	up := false
	_ = raw.Control(func(fd uintptr) {
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLRDHUP}}
		if n, err := unix.Poll(fds, 0); err == nil && n > 0 {
			up = fds[0].Revents&(unix.POLLRDHUP|unix.POLLHUP|unix.POLLERR) != 0
		}
	})
	return up
}

// serve speaks the protocol on c for the process that opened it, and
// releases what the process held when the connection ends.
func (dr *Driver) serve(c *net.UnixConn) {
	defer dr.wg.Done()
	defer dr.untrack(c)
	defer c.Close()
	pid, err := peerPID(c)
	if err != nil {
		klog.ErrorS(err, "Fake GPU driver refuses a connection")
		return
	}
	group := ""
	if dr.groupOf != nil {
		group = dr.groupOf(pid)
	}
	p := dr.st.attach(pid, group)
	dr.mu.Lock()
	cn := dr.conns[c]
	cn.p = p
	dr.mu.Unlock()
	defer dr.st.end(cn)
	klog.V(3).InfoS("Process connected to the fake GPU driver", "pid", pid, "group", group)
	defer klog.V(3).InfoS("Process left the fake GPU driver", "pid", pid)

	// Buffered so that a client that sends requests ahead (against the
	// protocol) still has its hang-up seen while a LAUNCH or SYNC waits.
	lines := make(chan request, 64)
	gone := make(chan struct{})
	done := make(chan struct{})
	defer close(done)
	dr.wg.Add(1)
	go func() {
		defer dr.wg.Done()
		defer close(gone)
		readRequests(c, lines, done)
	}()
	sess := &session{st: dr.st, waveNS: dr.waveNS, proc: p, gone: gone, reap: dr.reap,
		events: dr.events, clk: dr.clk, driverVersion: dr.driverVersion}
	if dr.nodes != nil {
		sess.access = func(minor int) error { return dr.nodes.check(pid, minor) }
	}
	defer func() { dr.events.drop(sess.set) }()
	for {
		var req request
		select {
		case req = <-lines:
		case <-gone:
			return
		}
		resp := "ERR " + reasonTooLong
		if !req.tooLong {
			resp = sess.handle(req.line)
		}
		if _, err := c.Write([]byte(resp + "\n")); err != nil {
			return
		}
	}
}

// request is one request line read from a connection.
type request struct {
	line    string
	tooLong bool // longer than maxRequestLength; its text is dropped
}

// readRequests sends the request lines of c to lines until c fails or
// ends (the process is gone) or done is closed. A last line without its
// newline is dropped: the process died before it finished the request.
func readRequests(c net.Conn, lines chan<- request, done <-chan struct{}) {
	r := bufio.NewReaderSize(c, maxRequestLength+1)
	for {
		req, err := readRequest(r)
		if err != nil {
			return
		}
		select {
		case lines <- req:
		case <-done:
			return
		}
	}
}

// readRequest reads one line, dropping the text of one that is too long.
func readRequest(r *bufio.Reader) (request, error) {
	b, err := r.ReadSlice('\n')
	if err == nil {
		return request{line: string(b[:len(b)-1])}, nil
	}
	if !errors.Is(err, bufio.ErrBufferFull) {
		return request{}, fmt.Errorf("read request: %w", err)
	}
	for errors.Is(err, bufio.ErrBufferFull) {
		_, err = r.ReadSlice('\n')
	}
	if err != nil {
		return request{}, fmt.Errorf("read request: %w", err)
	}
	return request{tooLong: true}, nil
}

// peerPID returns the pid of the process that connected c, in the
// daemon's pid namespace: the kernel records the peer's credentials at
// connect(2) and translates the pid for the reader (unix(7), SO_PEERCRED).
func peerPID(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("peer credentials: %w", err)
	}
	if credErr != nil {
		return 0, fmt.Errorf("peer credentials: getsockopt SO_PEERCRED: %w", credErr)
	}
	if cred.Pid <= 0 {
		// 0: the peer's pid namespace is not the daemon's nor one of
		// its descendants, so the peer has no pid here.
		return 0, fmt.Errorf("peer credentials: peer pid %d is not visible in the daemon's pid namespace", cred.Pid)
	}
	return int(cred.Pid), nil
}

// removeStale removes a socket left at path by a daemon that is gone. A
// path that is not a socket, or a socket something still listens on, is
// an error: it is not ours to remove.
func removeStale(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("check socket path %s: %w", path, err)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return fmt.Errorf("socket path %s exists and is not a socket", path)
	}
	if c, err := net.Dial("unix", path); err == nil {
		c.Close()
		return fmt.Errorf("socket path %s: another daemon is listening", path)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}
