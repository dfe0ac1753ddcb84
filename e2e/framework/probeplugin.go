//go:build e2e

package framework

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

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// ProbePlugin is a device plugin of the test's own that records every call
// a kubelet makes to it, with its arguments, in order. Registered with the
// real kubelet and with the fake one under the same settings, it shows what
// each kubelet does for the same pods, independently of the agent: the
// comparison behind the fake kubelet (kubelet.go).
type ProbePlugin struct {
	// Resource is the extended resource it advertises.
	Resource string
	// Devices are its device IDs, all healthy.
	Devices []string

	// Prefer, when set, makes GetPreferredAllocation available and
	// answers it; an error fails the call.
	Prefer func(*pluginapi.ContainerPreferredAllocationRequest) ([]string, error)
	// FailAllocate, when set, fails Allocate calls it returns an error for.
	FailAllocate func(ids []string) error

	dir, socket string
	server      *grpc.Server

	mu    sync.Mutex
	calls []ProbeCall
}

// ProbeCall is one call a kubelet made.
type ProbeCall struct {
	// Method is the RPC's name.
	Method string
	// Available, MustInclude and Size are a GetPreferredAllocation
	// container request's.
	Available, MustInclude []string `json:",omitempty"`
	Size                   int32    `json:",omitempty"`
	// IDs are an Allocate container request's device IDs, one list per
	// container request of the call.
	IDs [][]string `json:",omitempty"`
}

// Start serves the plugin on <dir>/<name>.sock and registers it with the
// kubelet listening on <dir>/kubelet.sock, as a device plugin does.
func (p *ProbePlugin) Start(ctx context.Context, dir, name string) error {
	p.dir, p.socket = dir, filepath.Join(dir, name+".sock")
	if err := os.Remove(p.socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale %s: %w", p.socket, err)
	}
	lis, err := net.Listen("unix", p.socket)
	if err != nil {
		return fmt.Errorf("probe plugin: listen on %s: %w", p.socket, err)
	}
	p.server = grpc.NewServer()
	pluginapi.RegisterDevicePluginServer(p.server, probeServer{p})
	go func() { _ = p.server.Serve(lis) }()

	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := grpc.DialContext(rctx, "unix://"+filepath.Join(dir, "kubelet.sock"),
		grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithBlock())
	if err != nil {
		p.Stop()
		return fmt.Errorf("probe plugin: dial kubelet in %s: %w", dir, err)
	}
	defer conn.Close()
	_, err = pluginapi.NewRegistrationClient(conn).Register(rctx, &pluginapi.RegisterRequest{
		Version: pluginapi.Version, Endpoint: filepath.Base(p.socket), ResourceName: p.Resource,
		Options: &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: p.Prefer != nil},
	})
	if err != nil {
		p.Stop()
		return fmt.Errorf("probe plugin: register %s: %w", p.Resource, err)
	}
	return nil
}

// Stop stops serving and removes the socket.
func (p *ProbePlugin) Stop() {
	if p.server != nil {
		p.server.Stop()
	}
	_ = os.Remove(p.socket)
}

// Calls returns the calls recorded so far and forgets them.
func (p *ProbePlugin) Calls() []ProbeCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.calls
	p.calls = nil
	return out
}

func (p *ProbePlugin) record(c ProbeCall) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
}

type probeServer struct{ p *ProbePlugin }

func (s probeServer) GetDevicePluginOptions(context.Context, *pluginapi.Empty) (*pluginapi.DevicePluginOptions, error) {
	s.p.record(ProbeCall{Method: "GetDevicePluginOptions"})
	return &pluginapi.DevicePluginOptions{GetPreferredAllocationAvailable: s.p.Prefer != nil}, nil
}

func (s probeServer) ListAndWatch(_ *pluginapi.Empty, stream pluginapi.DevicePlugin_ListAndWatchServer) error {
	s.p.record(ProbeCall{Method: "ListAndWatch"})
	devs := make([]*pluginapi.Device, 0, len(s.p.Devices))
	for _, id := range s.p.Devices {
		devs = append(devs, &pluginapi.Device{ID: id, Health: pluginapi.Healthy})
	}
	if err := stream.Send(&pluginapi.ListAndWatchResponse{Devices: devs}); err != nil {
		return err
	}
	<-stream.Context().Done()
	return nil
}

func (s probeServer) GetPreferredAllocation(_ context.Context, req *pluginapi.PreferredAllocationRequest) (*pluginapi.PreferredAllocationResponse, error) {
	resp := &pluginapi.PreferredAllocationResponse{}
	for _, r := range req.ContainerRequests {
		avail, must := slices.Clone(r.AvailableDeviceIDs), slices.Clone(r.MustIncludeDeviceIDs)
		// The kubelet builds these lists from sets: their order carries
		// nothing, so the record is sorted.
		slices.Sort(avail)
		slices.Sort(must)
		s.p.record(ProbeCall{Method: "GetPreferredAllocation", Available: avail, MustInclude: must, Size: r.AllocationSize})
		ids, err := s.p.Prefer(r)
		if err != nil {
			return nil, err
		}
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerPreferredAllocationResponse{DeviceIDs: ids})
	}
	return resp, nil
}

func (s probeServer) Allocate(_ context.Context, req *pluginapi.AllocateRequest) (*pluginapi.AllocateResponse, error) {
	call := ProbeCall{Method: "Allocate"}
	resp := &pluginapi.AllocateResponse{}
	for _, r := range req.ContainerRequests {
		ids := slices.Clone(r.DevicesIDs)
		slices.Sort(ids)
		call.IDs = append(call.IDs, ids)
		resp.ContainerResponses = append(resp.ContainerResponses, &pluginapi.ContainerAllocateResponse{
			Envs: map[string]string{"PROBE_DEVICES": fmt.Sprint(ids)},
		})
	}
	s.p.record(call)
	if s.p.FailAllocate != nil {
		for _, ids := range call.IDs {
			if err := s.p.FailAllocate(ids); err != nil {
				return nil, err
			}
		}
	}
	return resp, nil
}

func (s probeServer) PreStartContainer(context.Context, *pluginapi.PreStartContainerRequest) (*pluginapi.PreStartContainerResponse, error) {
	s.p.record(ProbeCall{Method: "PreStartContainer"})
	return &pluginapi.PreStartContainerResponse{}, nil
}
