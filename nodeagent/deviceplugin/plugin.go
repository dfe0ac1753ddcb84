package deviceplugin

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"k8s.io/klog/v2"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	"k8s.io/utils/clock"
)

// Defaults of Options.
const (
	DefaultKubeletSocket = "kubelet.sock"
	// SocketMode is the plugin socket's mode: the kubelet runs as root, and
	// connecting to a unix socket needs write permission on it.
	SocketMode    = os.FileMode(0o600)
	dialTimeout   = 5 * time.Second
	stopTimeout   = 5 * time.Second
	maxRetryDelay = 10 * time.Second
)

// Allocator serves the kubelet's Allocate calls.
type Allocator interface {
	Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)
}

// Options configure a Plugin.
type Options struct {
	// ResourceName is the extended resource advertised. Required.
	ResourceName string
	// SocketDir is the kubelet's device-plugin directory. Required.
	SocketDir string
	// SocketName is this plugin's socket file in SocketDir. Required.
	SocketName string
	// KubeletSocket is the kubelet's registration socket file in SocketDir;
	// empty means DefaultKubeletSocket.
	KubeletSocket string
	// Devices returns the devices to advertise. Required.
	Devices func() []*pluginapi.Device
	// Changed returns a channel closed when Devices may have changed; call
	// it before Devices. nil means the devices never change.
	Changed func() <-chan struct{}
	// Allocator serves Allocate. Required.
	Allocator Allocator
	// Preferrer, when set, names the cards GetPreferredAllocation prefers,
	// and the plugin tells the kubelet it answers GetPreferredAllocation.
	// nil leaves the choice of device IDs to the kubelet.
	Preferrer Preferrer
	// Clock paces registration retries; nil means the real clock.
	Clock clock.Clock
	// PollInterval, when positive, watches the socket directory by polling
	// at this interval instead of inotify. Zero uses inotify and falls back
	// to polling every second when no inotify instance is left.
	PollInterval time.Duration
}

// Plugin is the device-plugin server. Create it with New and call Run once.
type Plugin struct {
	pluginapi.UnimplementedDevicePluginServer
	opts Options

	mu      sync.Mutex
	stopped chan struct{} // closed when the current server stops
}

var _ pluginapi.DevicePluginServer = (*Plugin)(nil)

// New validates the options and returns a Plugin.
func New(opts Options) (*Plugin, error) {
	if opts.ResourceName == "" || opts.SocketDir == "" || opts.SocketName == "" {
		return nil, errors.New("device plugin: ResourceName, SocketDir and SocketName are required")
	}
	if opts.Devices == nil || opts.Allocator == nil {
		return nil, errors.New("device plugin: Devices and Allocator are required")
	}
	if opts.Changed == nil {
		never := make(chan struct{})
		opts.Changed = func() <-chan struct{} { return never }
	}
	if opts.KubeletSocket == "" {
		opts.KubeletSocket = DefaultKubeletSocket
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	return &Plugin{opts: opts}, nil
}

// SocketPath is the plugin's socket.
func (p *Plugin) SocketPath() string { return filepath.Join(p.opts.SocketDir, p.opts.SocketName) }

func (p *Plugin) kubeletPath() string { return filepath.Join(p.opts.SocketDir, p.opts.KubeletSocket) }

// Run serves and keeps the plugin registered until ctx ends.
func (p *Plugin) Run(ctx context.Context) error {
	watcher, stopWatch := p.watchDir(ctx)
	defer stopWatch()
	for {
		srv, err := p.serve()
		if err != nil {
			return err
		}
		// The identities of the sockets this round serves and registered
		// with: a queued directory event about an older socket (the removal
		// of this plugin's previous socket, which it does itself, or a
		// kubelet socket it already registered with) is not a restart.
		served := inode(p.SocketPath())
		watcher.Resync()
		kubelet, restart := p.register(ctx, watcher)
		if restart {
			restart = p.waitForRestart(ctx, watcher, served, kubelet)
		}
		p.stop(srv)
		if !restart {
			return nil
		}
		klog.InfoS("Kubelet socket recreated; restarting the device plugin", "resource", p.opts.ResourceName)
	}
}

// serve starts a gRPC server on the plugin socket.
func (p *Plugin) serve() (*grpc.Server, error) {
	path := p.SocketPath()
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	lis, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	// Only the kubelet (root) connects: no one else may call Allocate.
	// The socket is created with the process umask; the kubelet's
	// directory is itself root-only on a node, so the moment before the
	// chmod exposes nothing.
	if err := os.Chmod(path, SocketMode); err != nil {
		lis.Close()
		return nil, fmt.Errorf("restrict %s to its owner: %w", path, err)
	}
	srv := grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(srv, p)
	stopped := make(chan struct{})
	p.mu.Lock()
	p.stopped = stopped
	p.mu.Unlock()
	go func() {
		if err := srv.Serve(lis); err != nil {
			klog.ErrorS(err, "Device plugin server stopped", "socket", path)
		}
	}()
	klog.InfoS("Serving device plugin", "resource", p.opts.ResourceName, "socket", path)
	return srv, nil
}

// stop stops the server and removes its socket.
func (p *Plugin) stop(srv *grpc.Server) {
	p.mu.Lock()
	close(p.stopped) // ends the ListAndWatch streams
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		srv.GracefulStop()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(stopTimeout):
		srv.Stop()
	}
	if err := os.Remove(p.SocketPath()); err != nil && !errors.Is(err, os.ErrNotExist) {
		klog.ErrorS(err, "Cannot remove the device plugin socket", "socket", p.SocketPath())
	}
}

// register registers with the kubelet, retrying with backoff. It returns
// the identity of the kubelet socket it registered through, and false when
// ctx ended.
func (p *Plugin) register(ctx context.Context, watcher *dirWatch) (fileID, bool) {
	delay := 100 * time.Millisecond
	for {
		before := inode(p.kubeletPath())
		err := p.registerOnce(ctx)
		after := inode(p.kubeletPath())
		switch {
		case err == nil && (before == after || before == fileID{}):
			// Registered through the socket there now. When there was
			// none as the call began (the kubelet was starting: the dial
			// waits for it), the one there now is the one it reached;
			// keeping the empty identity took the socket's creation,
			// still queued, for a second kubelet restart and registered
			// again, and kubelet 1.30 then dropped the resource
			// (allocatable 0 until the agent restarts: the stream of the
			// first registration ending deregistered the second,
			// kubernetes/kubernetes#121994), found on the real node.
			klog.InfoS("Registered with the kubelet", "resource", p.opts.ResourceName, "endpoint", p.opts.SocketName)
			return after, true
		case err == nil:
			// The kubelet restarted during the call: the registration
			// may have reached the one that went away.
			err = fmt.Errorf("the kubelet socket %s was replaced while registering", p.kubeletPath())
		}
		klog.ErrorS(err, "Cannot register with the kubelet; retrying", "delay", delay)
		t := p.opts.Clock.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return fileID{}, false
		case <-t.C():
		case ev := <-watcher.Events: // the kubelet socket appearing is worth an early retry
			t.Stop()
			klog.V(4).InfoS("Socket directory event while registering", "event", ev)
		}
		delay = min(2*delay, maxRetryDelay)
	}
}

func (p *Plugin) registerOnce(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, dialTimeout)
	defer cancel()
	conn, err := dial(ctx, p.kubeletPath())
	if err != nil {
		return fmt.Errorf("dial the kubelet at %s: %w", p.kubeletPath(), err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(ctx, &pluginapi.RegisterRequest{
		Version:      pluginapi.Version,
		Endpoint:     p.opts.SocketName,
		ResourceName: p.opts.ResourceName,
		Options:      p.options(),
	})
	if err != nil {
		return fmt.Errorf("register %s: %w", p.opts.ResourceName, err)
	}
	return nil
}

// waitForRestart waits until a kubelet socket other than the one the plugin
// registered through appears, or the plugin socket it serves is removed
// (true), or ctx ends (false). Each event is checked against the sockets
// as they are now: inotify queues the events of the previous round, among
// them the removal of the previous plugin socket by stop, and taking that
// for a kubelet restart restarted the plugin again, in a loop, after every
// real kubelet restart.
func (p *Plugin) waitForRestart(ctx context.Context, watcher *dirWatch, served, kubelet fileID) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-watcher.Events:
			if !ok {
				return false
			}
			var stale bool
			switch {
			case ev.Name == p.kubeletPath() && ev.Has(fsnotify.Create):
				now := inode(p.kubeletPath())
				if now != (fileID{}) && now != kubelet {
					return true
				}
				stale = true
			case ev.Name == p.SocketPath() && ev.Has(fsnotify.Remove):
				if inode(p.SocketPath()) != served {
					return true
				}
				stale = true
			}
			if stale {
				klog.V(4).InfoS("Ignoring a directory event about a socket already handled", "event", ev)
			}
		case err, ok := <-watcher.Errors:
			if !ok {
				return false
			}
			klog.ErrorS(err, "Watching the device plugin directory")
		}
	}
}

// dial connects to a unix socket.
func dial(ctx context.Context, path string) (*grpc.ClientConn, error) {
	return grpc.DialContext(ctx, "unix://"+path,
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithBlock())
}

// GetDevicePluginOptions implements DevicePluginServer. The kubelet reads
// the options from this call when the plugin connects (devicemanager's
// PluginConnected), not from the registration; both say the same.
func (p *Plugin) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	return p.options(), nil
}

func (p *Plugin) options() *pluginapi.DevicePluginOptions {
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: p.opts.Preferrer != nil}
}

// ListAndWatch implements DevicePluginServer: it sends the device list, then
// again whenever it changes, until the stream or the server ends.
func (p *Plugin) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	p.mu.Lock()
	stopped := p.stopped
	p.mu.Unlock()
	var last []*pluginapi.Device
	for {
		changed := p.opts.Changed()
		devs := p.opts.Devices()
		if last == nil || !sameDevices(last, devs) {
			if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
				return fmt.Errorf("send the device list: %w", err)
			}
			klog.V(2).InfoS("Sent device list", "resource", p.opts.ResourceName, "devices", len(devs), "unhealthy", countUnhealthy(devs))
			last = devs
		}
		select {
		case <-changed:
		case <-stream.Context().Done():
			return nil
		case <-stopped:
			return nil
		}
	}
}

// Allocate implements DevicePluginServer.
func (p *Plugin) Allocate(ctx context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	return p.opts.Allocator.Allocate(ctx, req)
}

// PreStartContainer implements DevicePluginServer; it is not requested.
func (p *Plugin) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	return &pluginapi.PreStartContainerResponse{}, nil
}

func sameDevices(a, b []*pluginapi.Device) bool {
	return slices.EqualFunc(a, b, func(x, y *pluginapi.Device) bool {
		return x.ID == y.ID && x.Health == y.Health && x.GetTopology().String() == y.GetTopology().String()
	})
}

func countUnhealthy(devs []*pluginapi.Device) int {
	n := 0
	for _, d := range devs {
		if d.Health != pluginapi.Healthy {
			n++
		}
	}
	return n
}
