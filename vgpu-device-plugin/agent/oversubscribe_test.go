package agent_test

import (
	"context"
	"fmt"
	"testing"

	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/nodeagent/deviceplugin/fakekubelet"
	"github.com/vgpushare/vshare/vgpu-device-plugin/agent"
	"github.com/vgpushare/vshare/vgpu-device-plugin/allocate"
)

// allocateOverGRPC registers an agent built from cfg with a fake kubelet
// and returns the environment of its Allocate answer for one scheduled
// container: the path the kubelet takes, from the socket to the answer.
func allocateOverGRPC(t *testing.T, cfg *config.Config) map[string]string {
	t.Helper()
	a := serveAgent(t, cfg)
	inv, gpus, indexer, p := a.inv, a.gpus, a.indexer, a.plugin
	client := pluginapi.NewDevicePluginClient(fakekubelet.Dial(t, p.SocketPath()))
	if err := indexer.Add(scheduledPod("ok", fmt.Sprintf("%s,NVIDIA,8000,25:", gpus[3].UUID))); err != nil {
		t.Fatal(err)
	}
	id := agent.VirtualDevices(inv, func(string) bool { return true }, true)[0].ID
	req := &pluginapi.AllocateRequest{ContainerRequests: []*pluginapi.ContainerAllocateRequest{{DevicesIDs: []string{id}}}}
	resp, err := client.Allocate(context.Background(), req)
	if err != nil {
		t.Fatalf("Allocate: %v", err)
	}
	return resp.ContainerResponses[0].Envs
}

// TestAllocateSetsOversubscribeExactlyWhenMemoryIsScaledUp: the agent tells
// libvgpu to serve what a full card refuses from host memory
// (CUDA_OVERSUBSCRIBE=true) exactly when deviceMemoryScaling shares out more
// memory than the cards have (> 1), whether the scaling comes from the
// nvidia: section or the node's override; at 1 or below the variable is
// absent, not "false", so libvgpu keeps the card's out-of-memory.
func TestAllocateSetsOversubscribeExactlyWhenMemoryIsScaledUp(t *testing.T) {
	tests := []struct {
		name string
		doc  string // device-config.yaml as an operator writes it
		want bool
	}{
		{name: "default scaling 1", doc: "nvidia:\n  deviceSplitCount: 4\n"},
		{name: "scaling 1 written out", doc: "nvidia:\n  deviceSplitCount: 4\n  deviceMemoryScaling: 1\n"},
		{name: "scaled down", doc: "nvidia:\n  deviceSplitCount: 4\n  deviceMemoryScaling: 0.5\n"},
		{name: "just above 1", doc: "nvidia:\n  deviceSplitCount: 4\n  deviceMemoryScaling: 1.01\n", want: true},
		{name: "scaled up", doc: "nvidia:\n  deviceSplitCount: 4\n  deviceMemoryScaling: 2\n", want: true},
		{name: "node override scales up", want: true,
			doc: "nvidia:\n  deviceSplitCount: 4\nnodeconfig:\n- name: n1\n  devicememoryscaling: 1.5\n"},
		{name: "node override back to 1",
			doc: "nvidia:\n  deviceSplitCount: 4\n  deviceMemoryScaling: 2\nnodeconfig:\n- name: n1\n  devicememoryscaling: 1\n"},
		{name: "another node's override", doc: "nvidia:\n  deviceSplitCount: 4\nnodeconfig:\n- name: n2\n  devicememoryscaling: 2\n"},
		{name: "node override 0 inherits the scaled-up section", want: true,
			doc: "nvidia:\n  deviceSplitCount: 4\n  deviceMemoryScaling: 3\nnodeconfig:\n- name: n1\n  devicememoryscaling: 0\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := config.Parse([]byte(tc.doc))
			if err != nil {
				t.Fatal(err)
			}
			env := allocateOverGRPC(t, cfg)
			got, set := env[allocate.EnvOversubscribe]
			if !tc.want && set {
				t.Errorf("%s=%q, want it absent (libvgpu keeps the card's out-of-memory); config:\n%s", allocate.EnvOversubscribe, got, tc.doc)
			}
			if tc.want && got != "true" {
				t.Errorf("%s=%q (set %v), want \"true\"; config:\n%s", allocate.EnvOversubscribe, got, set, tc.doc)
			}
			// Either way the answer is a libvgpu answer: the limit is there.
			if env["CUDA_DEVICE_MEMORY_LIMIT_0"] != "8000m" {
				t.Errorf("CUDA_DEVICE_MEMORY_LIMIT_0 = %q, want 8000m", env["CUDA_DEVICE_MEMORY_LIMIT_0"])
			}
		})
	}
}
