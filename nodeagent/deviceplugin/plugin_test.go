package deviceplugin_test

import (
	"context"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/internal/notify"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin/fakekubelet"
)

// devices is a changeable device list.
type devices struct {
	mu   sync.Mutex
	list []*pluginapi.Device
	sig  notify.Signal
}

func (d *devices) get() []*pluginapi.Device {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.list
}

func (d *devices) set(list []*pluginapi.Device) {
	d.mu.Lock()
	d.list = list
	d.mu.Unlock()
	d.sig.Broadcast()
}

type allocFunc func(context.Context, *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error)

func (f allocFunc) Allocate(ctx context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	return f(ctx, r)
}

func dev(id, health string) *pluginapi.Device { return &pluginapi.Device{ID: id, Health: health} }

func TestPluginRegistersServesAndReregisters(t *testing.T) {
	t.Run("inotify", func(t *testing.T) { testRegistersServesAndReregisters(t, 0) })
	t.Run("polling", func(t *testing.T) { testRegistersServesAndReregisters(t, 20*time.Millisecond) })
}

func testRegistersServesAndReregisters(t *testing.T, poll time.Duration) {
	dir := fakekubelet.ShortTempDir(t)
	kubelet := fakekubelet.Start(t, dir)
	devs := &devices{list: []*pluginapi.Device{dev("GPU-a-0", "Healthy"), dev("GPU-a-1", "Healthy")}}
	p, err := deviceplugin.New(deviceplugin.Options{
		ResourceName: "volcano.sh/vgpu-number", SocketDir: dir, SocketName: "volcano-vgpu.sock",
		Devices: devs.get, Changed: devs.sig.C,
		Allocator: allocFunc(func(_ context.Context, r *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
			return &pluginapi.AllocateResponse{ContainerResponses: []*pluginapi.ContainerAllocateResponse{
				{Envs: map[string]string{"N": r.ContainerRequests[0].DevicesIDs[0]}}}}, nil
		}),
		PollInterval: poll,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()

	reg := kubelet.Wait(t)
	want := &pluginapi.RegisterRequest{Version: "v1beta1", Endpoint: "volcano-vgpu.sock", ResourceName: "volcano.sh/vgpu-number",
		Options: &pluginapi.DevicePluginOptions{}}
	if diff := cmp.Diff(want.String(), reg.String()); diff != "" {
		t.Errorf("registration (-want +got):\n%s", diff)
	}

	client := pluginapi.NewDevicePluginClient(fakekubelet.Dial(t, p.SocketPath()))
	stream, err := client.ListAndWatch(context.Background(), &pluginapi.Empty{})
	if err != nil {
		t.Fatal(err)
	}
	recv := func() []string {
		t.Helper()
		r, err := stream.Recv()
		if err != nil {
			t.Fatalf("ListAndWatch: %v", err)
		}
		var out []string
		for _, d := range r.Devices {
			out = append(out, d.ID+"="+d.Health)
		}
		return out
	}
	if diff := cmp.Diff([]string{"GPU-a-0=Healthy", "GPU-a-1=Healthy"}, recv()); diff != "" {
		t.Errorf("first list (-want +got):\n%s", diff)
	}
	devs.set([]*pluginapi.Device{dev("GPU-a-0", "Unhealthy"), dev("GPU-a-1", "Unhealthy")})
	if diff := cmp.Diff([]string{"GPU-a-0=Unhealthy", "GPU-a-1=Unhealthy"}, recv()); diff != "" {
		t.Errorf("list after the health change (-want +got):\n%s", diff)
	}
	resp, err := client.Allocate(context.Background(), &pluginapi.AllocateRequest{
		ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: []string{"GPU-a-1"}}}})
	if err != nil || resp.ContainerResponses[0].Envs["N"] != "GPU-a-1" {
		t.Errorf("Allocate = %v, %v; want it delegated", resp, err)
	}

	// The kubelet restarts: it wipes the directory and creates kubelet.sock.
	kubelet.Stop()
	os.Remove(p.SocketPath())
	kubelet2 := fakekubelet.Start(t, dir)
	if r := kubelet2.Wait(t); r.ResourceName != "volcano.sh/vgpu-number" {
		t.Errorf("re-registration for %q", r.ResourceName)
	}
	// The removal of its socket and the new kubelet socket may be seen as
	// two changes (always when polling), so the plugin may restart twice:
	// wait for it to settle serving.
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := os.Stat(p.SocketPath())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("plugin socket after restart: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Then it stays registered until the kubelet restarts again. The
	// events of its own restart (the removal of its previous socket) are
	// not a kubelet restart: taking them for one restarted the plugin in a
	// loop, every few milliseconds, dropping the kubelet's connection and
	// every Allocate in flight (found by the e2e fault campaign).
	quiet := time.After(time.Second)
	extra := 0
	for waiting := true; waiting; {
		select {
		case <-kubelet2.Requests:
			extra++
		case <-quiet:
			waiting = false
		}
	}
	if extra > 1 {
		t.Errorf("the plugin registered %d more times within a second of re-registering, want at most 1: it keeps restarting", extra)
	}

	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	if _, err := os.Stat(p.SocketPath()); !os.IsNotExist(err) {
		t.Errorf("plugin socket left after stop: %v", err)
	}
	kubelet2.Stop()
}
