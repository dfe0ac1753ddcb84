package allocate_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// mpsNode puts the test node's cards in the mps operating mode, with the
// MPS daemon's directories under /run/mps-test.
func mpsNode(cfg *config.Config, o *allocate.Options) {
	cfg.NodeConfigs = append(cfg.NodeConfigs, config.NodeConfig{Name: nodeName, OperatingMode: config.OperatingModeMPS})
	o.MPSHostRoot = "/run/mps-test"
}

func TestAllocateMPS(t *testing.T) {
	mpsMounts := []*pluginapi.Mount{
		{ContainerPath: "/tmp/nvidia-mps", HostPath: "/run/mps-test/pipe"},
		{ContainerPath: "/var/log/nvidia-mps", HostPath: "/run/mps-test/log", ReadOnly: true},
		{ContainerPath: "/dev/shm", HostPath: "/run/mps-test/shm"},
	}
	tests := []struct {
		name  string
		cfg   func(*config.Config)
		cards func(u []string) string
		n     int
		extra map[string]int64
		want  map[string]string
	}{
		{
			name:  "two cards: threads from the cores, pinned memory per visible device",
			cards: func(u []string) string { return entry(u[3], 4000, 30) + entry(u[1], 4000, 30) },
			n:     2, extra: map[string]int64{"volcano.sh/vgpu-memory": 4000, "volcano.sh/vgpu-cores": 30, "volcano.sh/vgpu-priority": 1},
			want: map[string]string{
				"CUDA_MPS_PIPE_DIRECTORY":           "/tmp/nvidia-mps",
				"CUDA_MPS_LOG_DIRECTORY":            "/var/log/nvidia-mps",
				"CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "30",
				"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT":  "0=4000M,1=4000M",
				"CUDA_MPS_CLIENT_PRIORITY":          "1",
			},
		},
		{
			name:  "no cores reserved: no thread cap",
			cards: func(u []string) string { return entry(u[0], 2000, 0) },
			n:     1, extra: map[string]int64{"volcano.sh/vgpu-memory": 2000},
			want: map[string]string{
				"CUDA_MPS_PIPE_DIRECTORY":          "/tmp/nvidia-mps",
				"CUDA_MPS_LOG_DIRECTORY":           "/var/log/nvidia-mps",
				"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2000M",
			},
		},
		{
			name:  "disableCoreLimit: no thread cap",
			cfg:   func(c *config.Config) { c.NVIDIA.DisableCoreLimit = true },
			cards: func(u []string) string { return entry(u[0], 2000, 50) },
			n:     1, extra: map[string]int64{"volcano.sh/vgpu-memory": 2000, "volcano.sh/vgpu-cores": 50},
			want: map[string]string{
				"CUDA_MPS_PIPE_DIRECTORY":          "/tmp/nvidia-mps",
				"CUDA_MPS_LOG_DIRECTORY":           "/var/log/nvidia-mps",
				"CUDA_MPS_PINNED_DEVICE_MEM_LIMIT": "0=2000M",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t, mpsNode, func(c *config.Config, _ *allocate.Options) {
				if tt.cfg != nil {
					tt.cfg(c)
				}
			})
			ids := tt.cards(e.uuids)
			e.add(t, newPod("p").container("c", int64(tt.n), tt.extra).allocated(ids, 100).build())
			resp, err := e.alloc.Allocate(context.Background(), request(tt.n))
			if err != nil {
				t.Fatal(err)
			}
			got := resp.ContainerResponses[0]
			want := &pluginapi.ContainerAllocateResponse{Envs: map[string]string{}, Mounts: mpsMounts}
			for k, v := range tt.want {
				want.Envs[k] = v
			}
			entries, err := vgpuproto.DecodeAllocation(ids)
			if err != nil {
				t.Fatal(err)
			}
			var visible []string
			for _, d := range entries[0] {
				visible = append(visible, d.UUID)
			}
			want.Envs["NVIDIA_VISIBLE_DEVICES"] = strings.Join(visible, ",")
			if diff := cmp.Diff(want, got, cmpProto()); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
			// No libvgpu: no shared region was created for the container.
			if _, err := os.Stat(filepath.Join(e.cache, "containers", "uid-p_c")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("container cache directory: %v; want none on an MPS card", err)
			}
		})
	}
}

// TestAllocateMPSDefaultRoot: without MPSHostRoot the daemon's directories
// are under /run/nvidia/mps, NVIDIA's device plugin's MPS root.
func TestAllocateMPSDefaultRoot(t *testing.T) {
	e := newEnv(t, func(cfg *config.Config, _ *allocate.Options) {
		cfg.NodeConfigs = append(cfg.NodeConfigs, config.NodeConfig{Name: nodeName, OperatingMode: config.OperatingModeMPS})
	})
	e.add(t, newPod("p").container("c", 1, map[string]int64{"volcano.sh/vgpu-memory": 1000}).allocated(entry(e.uuids[0], 1000, 0), 100).build())
	resp, err := e.alloc.Allocate(context.Background(), request(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.ContainerResponses[0].Mounts[0].HostPath; got != "/run/nvidia/mps/pipe" {
		t.Errorf("pipe directory mounted from %s, want /run/nvidia/mps/pipe", got)
	}
}
