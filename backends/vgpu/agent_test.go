package vgpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// upstreamNode is fourCards as volcano-vgpu-device-plugin registers them:
// six fields, no NUMA node.
func upstreamNode() *v1.Node {
	reg := ""
	for _, u := range []string{"GPU-0", "GPU-1", "GPU-2", "GPU-3"} {
		reg += u + ",10,16384,NVIDIA-Tesla V100-PCIE-32GB,true,hami-core:"
	}
	return testkit.Node("node-a", vgpuproto.AnnotationRegister, reg, vgpuproto.AnnotationHandshake, "Reported 2026-01-01")
}

// A pod's agent classes are the card counts of its entries on a node whose
// agent is this project's (it matches an Allocate by the count), and every
// count up to the node's cards where the agent serves the oldest pending
// pod whatever it asks (upstream's, HAMi's) or the record is unreadable.
func TestAgentClasses(t *testing.T) {
	all := []string{"1", "2", "3", "4"}
	cases := []struct {
		name string
		node *v1.Node
		pod  *v1.Pod
		want []string
	}{
		{"ours, one card", fourCards(), placed(one("p", 1, 1000, 10), "GPU-0,NVIDIA,1000,10:"), []string{"1"}},
		{"ours, two cards", fourCards(), placed(one("p", 2, 1000, 10), "GPU-0,NVIDIA,1000,10:GPU-1,NVIDIA,1000,10:"), []string{"2"}},
		{"ours, containers of one and two cards and one without", fourCards(),
			placed(vpod("p", []ctr{{n: 1, mem: 1000, pct: -1, cores: 10}, {n: -1, mem: -1, pct: -1, cores: -1}, {n: 2, mem: 1000, pct: -1, cores: 10}}),
				"GPU-0,NVIDIA,1000,10:;;GPU-1,NVIDIA,1000,10:GPU-2,NVIDIA,1000,10:"), []string{"1", "2"}},
		{"ours, two containers of one card", fourCards(),
			placed(vpod("p", []ctr{{n: 1, mem: 1000, pct: -1, cores: 10}, {n: 1, mem: 1000, pct: -1, cores: 10}}),
				"GPU-0,NVIDIA,1000,10:;GPU-1,NVIDIA,1000,10:"), []string{"1"}},
		{"ours, unreadable record", fourCards(), placed(one("p", 1, 1000, 10), "GPU-0,NVIDIA,x,10:"), all},
		{"ours, no record", fourCards(), one("p", 1, 1000, 10), all},
		{"volcano-vgpu-device-plugin", upstreamNode(), placed(one("p", 1, 1000, 10), "GPU-0,NVIDIA,1000,10:"), all},
		{"HAMi's plugin, two cards", hamiNode(), placed(one("p", 1, 1000, 10), "GPU-h0,NVIDIA,1000,10:"), []string{"1", "2"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t), tc.node)
			if diff := cmp.Diff(tc.want, d.AgentClasses(tc.pod)); diff != "" {
				t.Errorf("AgentClasses (-want +got):\n%s", diff)
			}
		})
	}
}
