package plugin

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
}

// watchDir watches the socket directory with inotify, or, when that fails
// (inotify instances are a per-user limit, 128 by default, that many agents
// on one host exhaust, as in tests), by polling the two sockets every
// pollInterval. The returned function stops watching.
func (p *Plugin) watchDir(ctx context.Context) (*dirWatch, func()) {
	w, err := fsnotify.NewWatcher()
	if err == nil {
		if err = w.Add(p.opts.SocketDir); err == nil {
			return &dirWatch{Events: w.Events, Errors: w.Errors}, func() { _ = w.Close() }
		}
		_ = w.Close()
	}
	klog.InfoS("Cannot watch the socket directory with inotify; polling it instead",
		"dir", p.opts.SocketDir, "interval", pollInterval, "err", err)
	ctx, cancel := context.WithCancel(ctx)
	events := make(chan fsnotify.Event, 4)
	go p.poll(ctx, events)
	return &dirWatch{Events: events}, cancel
}

// poll sends a Create event for the kubelet socket when it appears or is
// replaced and a Remove event for the plugin socket when it disappears.
func (p *Plugin) poll(ctx context.Context, events chan<- fsnotify.Event) {
	kubelet, plugin := p.kubeletPath(), p.SocketPath()
	lastKubelet, lastPlugin := inode(kubelet), inode(plugin)
	for {
		t := p.opts.Clock.NewTimer(pollInterval)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C():
		}
		k, pl := inode(kubelet), inode(plugin)
		var ev *fsnotify.Event
		switch {
		case k != 0 && k != lastKubelet:
			ev = &fsnotify.Event{Name: kubelet, Op: fsnotify.Create}
		case pl == 0 && lastPlugin != 0:
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

// inode returns the file's inode number, 0 when it does not exist.
func inode(path string) uint64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Ino
	}
	return 1
}
