package deviceplugin

import (
	"context"
	"os"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"
	"k8s.io/klog/v2"
)

// pollInterval is how often the socket directory is checked when inotify
// is not available.
const pollInterval = time.Second

// dirWatch reports changes in the socket directory: the kubelet socket
// created (again) and the plugin socket removed.
type dirWatch struct {
	Events <-chan fsnotify.Event
	Errors <-chan error
	// resync, when polling, forgets pending events and takes the sockets
	// as they are now; the plugin calls it each time it starts serving,
	// before registering, so a change it is already handling does not
	// restart it a second time and a change after that is seen.
	resync chan chan struct{}
	done   <-chan struct{}
}

// Resync is called when the plugin (re)starts serving; it returns once the
// poller has taken the new state.
func (w *dirWatch) Resync() {
	if w.resync == nil {
		return
	}
	ack := make(chan struct{})
	select {
	case w.resync <- ack:
		<-ack
	case <-w.done:
	}
}

// watchDir watches the socket directory with inotify, or, when that fails
// (inotify instances are a per-user limit, 128 by default, that many agents
// on one host exhaust, as in tests), by polling the two sockets every
// pollInterval. The returned function stops watching.
func (p *Plugin) watchDir(ctx context.Context) (*dirWatch, func()) {
	interval := p.opts.PollInterval
	if interval <= 0 {
		interval = pollInterval
		w, err := fsnotify.NewWatcher()
		if err == nil {
			if err = w.Add(p.opts.SocketDir); err == nil {
				return &dirWatch{Events: w.Events, Errors: w.Errors}, func() { _ = w.Close() }
			}
			_ = w.Close()
		}
		klog.InfoS("Cannot watch the socket directory with inotify; polling it instead",
			"dir", p.opts.SocketDir, "interval", interval, "err", err)
	}
	ctx, cancel := context.WithCancel(ctx)
	events := make(chan fsnotify.Event, 4)
	resync := make(chan chan struct{})
	go p.poll(ctx, interval, events, resync)
	return &dirWatch{Events: events, resync: resync, done: ctx.Done()}, cancel
}

// poll sends a Create event for the kubelet socket when it appears or is
// replaced and a Remove event for the plugin socket when it disappears.
func (p *Plugin) poll(ctx context.Context, interval time.Duration, events chan fsnotify.Event, resync <-chan chan struct{}) {
	kubelet, plugin := p.kubeletPath(), p.SocketPath()
	lastKubelet, lastPlugin := inode(kubelet), inode(plugin)
	for {
		t := p.opts.Clock.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case ack := <-resync:
			t.Stop()
			for len(events) > 0 {
				<-events
			}
			lastKubelet, lastPlugin = inode(kubelet), inode(plugin)
			close(ack)
			continue
		case <-t.C():
		}
		k, pl := inode(kubelet), inode(plugin)
		var ev *fsnotify.Event
		switch {
		case k != (fileID{}) && k != lastKubelet:
			ev = &fsnotify.Event{Name: kubelet, Op: fsnotify.Create}
		case pl == (fileID{}) && lastPlugin != (fileID{}):
			ev = &fsnotify.Event{Name: plugin, Op: fsnotify.Remove}
		}
		lastKubelet, lastPlugin = k, pl
		if ev == nil {
			continue
		}
		select {
		case events <- *ev:
		case <-ctx.Done():
			return
		}
	}
}

// fileID identifies a file: its inode and change time, since a socket
// created again right after the old one was removed may get the same inode.
type fileID struct {
	ino   uint64
	ctime int64
}

// inode returns the file's identity, the zero value when it does not exist.
func inode(path string) fileID {
	fi, err := os.Stat(path)
	if err != nil {
		return fileID{}
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return fileID{ino: st.Ino, ctime: st.Ctim.Nano()}
	}
	return fileID{ino: 1, ctime: fi.ModTime().UnixNano()}
}
