package quality

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func TestVGPUPodRequest(t *testing.T) {
	tests := []struct {
		name string
		pod  Pod
		want map[string]int64
		typ  string
	}{
		{name: "share", pod: Pod{CPU: 4000, Memory: 1024, NumGPU: 1, Milli: 460},
			want: map[string]int64{"volcano.sh/vgpu-number": 1, "volcano.sh/vgpu-cores": 46, "volcano.sh/vgpu-memory-percentage": 46}},
		{name: "whole cards with a model list", pod: Pod{NumGPU: 8, Milli: 1000, Spec: []string{"V100M16", "V100M32"}},
			want: map[string]int64{"volcano.sh/vgpu-number": 8, "volcano.sh/vgpu-cores": 100, "volcano.sh/vgpu-memory-percentage": 100},
			typ:  "V100M16,V100M32"},
		{name: "CPU only", pod: Pod{CPU: 1000}, want: map[string]int64{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := vgpuPod(&tc.pod, 1)
			got := map[string]int64{}
			for name, q := range p.Spec.Containers[0].Resources.Limits {
				got[string(name)] = q.Value()
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("limits (-want +got):\n%s", diff)
			}
			if typ := p.Annotations[vgpuproto.AnnotationUseType]; typ != tc.typ {
				t.Errorf("%s = %q, want %q", vgpuproto.AnnotationUseType, typ, tc.typ)
			}
		})
	}
}

// TestVGPUPolicyPlaces places the first 300 pods of the default trace on
// its first 60 nodes through each backend-driven policy (small enough for
// the race detector): every placement the backend makes must fit the
// simulator's own account of the cards, which Cluster.Place checks, and
// a pod must fail only when no node could take it.
func TestVGPUPolicyPlaces(t *testing.T) {
	full := loadTrace(t, "default")
	tr := &Trace{Name: "default-head", Nodes: full.Nodes[:60], Pods: full.Pods[:300]}
	for _, policy := range OurPolicies() {
		t.Run(policy, func(t *testing.T) {
			rank := make([]int, len(tr.Nodes))
			for i := range rank {
				rank[i] = i
			}
			c := NewCluster(tr, rank)
			pol, err := newVGPUPolicy(tr, policy)
			if err != nil {
				t.Fatal(err)
			}
			placed := 0
			for i := range tr.Pods {
				p := &tr.Pods[i]
				feasible := false
				for n := range c.Nodes {
					feasible = feasible || c.Feasible(n, p)
				}
				n, cards, ok, err := pol.Place(c, p)
				if err != nil {
					t.Fatalf("pod %s: %v", p.Name, err)
				}
				if ok != feasible {
					t.Fatalf("pod %s: placed %v, but a node that fits exists: %v", p.Name, ok, feasible)
				}
				if !ok {
					continue
				}
				if err := c.Place(n, cards, p); err != nil {
					t.Fatalf("backend's choice does not fit: %v", err)
				}
				placed++
			}
			if placed == 0 || c.Used == 0 {
				t.Errorf("placed %d pods, %d GPU milli", placed, c.Used)
			}
		})
	}
}

func TestCardsOf(t *testing.T) {
	got, err := cardsOf(cardUUID(7, 3)+",NVIDIA,16384,100:"+cardUUID(7, 10)+",NVIDIA,16384,100:", 7)
	if err != nil || !cmp.Equal(got, []int{3, 10}) {
		t.Errorf("cardsOf = %v, %v, want [3 10]", got, err)
	}
	if _, err := cardsOf(cardUUID(8, 1)+",NVIDIA,1,1:", 7); err == nil {
		t.Error("cardsOf accepted a card of another node")
	}
}
