package vgpu

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
)

func TestQueueRequest(t *testing.T) {
	b := newBackend(t)
	tests := []struct {
		name string
		pod  *v1.Pod
		want map[string]float64
	}{
		{name: "memory and cores per card, times cards", pod: one("p", 2, 3000, 25),
			want: map[string]float64{"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 6000, "volcano.sh/vgpu-cores": 50}},
		{name: "containers add up", pod: vpod("p", []ctr{{n: 1, mem: 1000, pct: -1, cores: 10}, {n: 1, mem: 2000, pct: -1, cores: 0}}),
			want: map[string]float64{"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 3000, "volcano.sh/vgpu-cores": 10}},
		{name: "a percentage leaves memory out", pod: vpod("p", []ctr{{n: 1, mem: -1, pct: 50, cores: 20}}),
			want: map[string]float64{"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 20}},
		{name: "an init container and the app container: the larger of each", pod: withInit(one("p", 1, 2000, 40), "i", ctr{1, 8000, -1, 20}),
			want: map[string]float64{"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-memory": 8000, "volcano.sh/vgpu-cores": 40}},
		{name: "a sidecar adds to the app container", pod: withInit(one("p", 1, 2000, 40), "s", ctr{1, 1000, -1, 10}),
			want: map[string]float64{"volcano.sh/vgpu-number": 2, "volcano.sh/vgpu-memory": 3000, "volcano.sh/vgpu-cores": 50}},
		{name: "no request", pod: vpod("p", []ctr{{n: -1, mem: -1, pct: -1, cores: -1}})},
		{name: "invalid request (cores above 100)", pod: one("p", 1, 1000, 150)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, b.QueueRequest(tc.pod)); diff != "" {
				t.Errorf("QueueRequest (-want +got):\n%s", diff)
			}
		})
	}
}
