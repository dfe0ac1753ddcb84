package deviceplugin_test

import (
	"context"
	"os"
	"syscall"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin/fakekubelet"
)

// The plugin socket is the agent's alone (mode 0600): only the kubelet,
// root, may connect and call Allocate, whatever the process umask. The
// vNPU agent serves through this package too.
func TestPluginSocketIsOwnerOnly(t *testing.T) {
	old := syscall.Umask(0) // the widest: a socket would be 0777
	defer syscall.Umask(old)
	dir := fakekubelet.ShortTempDir(t)
	kubelet := fakekubelet.Start(t, dir)
	devs := &devices{list: []*pluginapi.Device{dev("GPU-a-0", "Healthy")}}
	p, err := deviceplugin.New(deviceplugin.Options{
		ResourceName: "volcano.sh/vgpu-number", SocketDir: dir, SocketName: "volcano-vgpu.sock", Devices: devs.get, Changed: devs.sig.C,
		Allocator: allocFunc(func(context.Context, *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			return &pluginapi.AllocateResponse{}, nil
		}),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	defer func() { cancel(); <-done }()
	kubelet.Wait(t) // registration comes after the socket is served

	fi, err := os.Lstat(p.SocketPath())
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != deviceplugin.SocketMode || deviceplugin.SocketMode != 0o600 {
		t.Errorf("%s: mode %v, want a socket with mode 0600", p.SocketPath(), fi.Mode())
	}
	if uid := fi.Sys().(*syscall.Stat_t).Uid; int(uid) != os.Geteuid() {
		t.Errorf("%s: owner %d, want the agent's %d", p.SocketPath(), uid, os.Geteuid())
	}
	// The owner still connects and is served.
	client := pluginapi.NewDevicePluginClient(fakekubelet.Dial(t, p.SocketPath()))
	if _, err := client.GetDevicePluginOptions(context.Background(), &pluginapi.Empty{}); err != nil {
		t.Errorf("GetDevicePluginOptions over the 0600 socket: %v", err)
	}
}
