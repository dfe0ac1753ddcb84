package vgpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// cardsOf returns the UUIDs of a vgpu-ids-new value, per container.
func cardsOf(ids string) []string {
	var out []string
	for _, ctr := range strings.Split(ids, ";") {
		var uuids []string
		for _, e := range strings.Split(ctr, ":") {
			if e != "" {
				uuids = append(uuids, strings.Split(e, ",")[0])
			}
		}
		out = append(out, strings.Join(uuids, ","))
	}
	return out
}

func TestCardChoiceAndScoreAgree(t *testing.T) {
	// GPU-0 holds 8 GiB, GPU-1 4 GiB, GPU-2 and GPU-3 are idle.
	held := []*v1.Pod{placed(one("a", 1, 8192, 0), "GPU-0,NVIDIA,8192,0:"), placed(one("b", 1, 4096, 0), "GPU-1,NVIDIA,4096,0:")}
	tests := []struct {
		name   string
		policy string
		pod    *v1.Pod
		want   []string
	}{
		{name: "binpack takes the fullest card", policy: device.PolicyBinpack, pod: one("p", 1, 1024, 0), want: []string{"GPU-0"}},
		{name: "binpack skips a card that is too full", policy: device.PolicyBinpack, pod: one("p", 1, 9000, 0), want: []string{"GPU-1"}},
		{name: "spread takes an idle card", policy: device.PolicySpread, pod: one("p", 1, 1024, 0), want: []string{"GPU-2"}},
		{name: "spread over two cards", policy: device.PolicySpread, pod: one("p", 2, 1024, 0), want: []string{"GPU-2,GPU-3"}},
		{name: "binpack over three cards", policy: device.PolicyBinpack, pod: one("p", 3, 1024, 0), want: []string{"GPU-0,GPU-1,GPU-2"}},
		{name: "pod annotation overrides the global policy", policy: device.PolicyBinpack,
			pod: one("p", 1, 1024, 0, vgpuproto.AnnotationGPUPolicy, device.PolicySpread), want: []string{"GPU-2"}},
		{name: "two containers", policy: device.PolicyBinpack, pod: vpod("p", []ctr{{1, 1024, -1, 0}, {-1, -1, -1, -1}, {1, 8000, -1, 0}}),
			want: []string{"GPU-0", "", "GPU-1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t), fourCards(), held...)
			score := d.ScoreNode(tc.pod, tc.policy)
			ids := allocated(t, d, tc.pod, tc.policy)
			if diff := cmp.Diff(tc.want, cardsOf(ids)); diff != "" {
				t.Errorf("cards (-want +got):\n%s", diff)
			}
			if score <= 0 || score > device.MaxScore {
				t.Errorf("ScoreNode = %v, want in (0, %d]", score, device.MaxScore)
			}
		})
	}
}

func TestSpreadScoresIdleCardsHigher(t *testing.T) {
	idle := devicesOf(t, newBackend(t), fourCards())
	busy := devicesOf(t, newBackend(t), vgpuNode([]card{gpu("GPU-0", 16384)}), placed(one("a", 1, 8192, 50), "GPU-0,NVIDIA,8192,50:"))
	p := one("p", 1, 1024, 10)
	if s := idle.ScoreNode(p, device.PolicySpread); s != device.MaxScore {
		t.Errorf("spread score of an idle node = %v, want %d", s, device.MaxScore)
	}
	if si, sb := idle.ScoreNode(p, device.PolicySpread), busy.ScoreNode(p, device.PolicySpread); si <= sb {
		t.Errorf("spread: idle node %v must beat busy node %v", si, sb)
	}
	if si, sb := idle.ScoreNode(p, device.PolicyBinpack), busy.ScoreNode(p, device.PolicyBinpack); si >= sb {
		t.Errorf("binpack: busy node %v must beat idle node %v", sb, si)
	}
	nodeSpread := one("p", 1, 1024, 10, vgpuproto.AnnotationNodePolicy, device.PolicySpread)
	if si, sb := idle.ScoreNode(nodeSpread, device.PolicyBinpack), busy.ScoreNode(nodeSpread, device.PolicyBinpack); si <= sb {
		t.Errorf("hami.io/node-scheduler-policy spread: idle node %v must beat busy node %v", si, sb)
	}
}

func TestPercentageIsPerCard(t *testing.T) {
	node := vgpuNode([]card{gpu("GPU-16", 16384), gpu("GPU-80", 81920)})
	p := vpod("p", []ctr{{2, -1, 50, 0}})
	d := devicesOf(t, newBackend(t), node)
	ids := allocated(t, d, p, device.PolicyBinpack)
	if ids != "GPU-80,NVIDIA,40960,0:GPU-16,NVIDIA,8192,0:" && ids != "GPU-16,NVIDIA,8192,0:GPU-80,NVIDIA,40960,0:" {
		t.Errorf("vgpu-ids-new = %q, want 8192 MiB on the 16 GiB card and 40960 on the 80 GiB one", ids)
	}
	// 60% of the 16 GiB card no longer fits next to 50%, 60% of the 80 GiB one does not either.
	if st := d.FilterNode(vpod("q", []ctr{{1, -1, 60, 0}}), device.PolicyBinpack); st.IsSuccess() {
		t.Error("60% fits next to 50% on a card")
	}
	if st := d.FilterNode(vpod("q", []ctr{{1, -1, 50, 0}}), device.PolicyBinpack); !st.IsSuccess() {
		t.Errorf("50%% next to 50%%: %v", st.Message())
	}
}

func TestNUMABind(t *testing.T) {
	hami := `[` +
		`{"id":"GPU-0","count":10,"devmem":16384,"type":"NVIDIA-A10","numa":0,"health":true},` +
		`{"id":"GPU-1","count":10,"devmem":16384,"type":"NVIDIA-A10","numa":0,"health":true},` +
		`{"id":"GPU-2","count":10,"devmem":16384,"type":"NVIDIA-A10","numa":1,"health":true},` +
		`{"id":"GPU-3","count":10,"devmem":16384,"type":"NVIDIA-A10","numa":1,"health":true},` +
		`{"id":"GPU-4","count":10,"devmem":16384,"type":"NVIDIA-A10","numa":1,"health":true}]`
	node := nodeWith(vgpuproto.AnnotationHAMiRegister, hami)
	busy := placed(one("a", 1, 8000, 0), "GPU-1,NVIDIA,8000,0:")
	tests := []struct {
		name   string
		policy string
		pod    *v1.Pod
		want   []string
		fail   string
	}{
		{name: "without binding binpack mixes NUMA nodes", policy: device.PolicyBinpack, pod: one("p", 2, 1000, 0),
			want: []string{"GPU-1,GPU-0"}},
		{name: "binding keeps both cards on one NUMA node (binpack: the fuller one)", policy: device.PolicyBinpack,
			pod: one("p", 2, 1000, 0, vgpuproto.AnnotationNUMABind, "true"), want: []string{"GPU-1,GPU-0"}},
		{name: "binding with three cards needs NUMA node 1", policy: device.PolicyBinpack,
			pod: one("p", 3, 1000, 0, vgpuproto.AnnotationNUMABind, "true"), want: []string{"GPU-2,GPU-3,GPU-4"}},
		{name: "binding under spread takes the emptier NUMA node", policy: device.PolicySpread,
			pod: one("p", 2, 1000, 0, vgpuproto.AnnotationNUMABind, "true"), want: []string{"GPU-2,GPU-3"}},
		{name: "four cards do not fit one NUMA node", policy: device.PolicyBinpack,
			pod: one("p", 4, 1000, 0, vgpuproto.AnnotationNUMABind, "true"), fail: ReasonNUMASplit},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t), node, busy)
			if tc.fail != "" {
				st := d.FilterNode(tc.pod, tc.policy)
				if st.IsSuccess() || !strings.Contains(st.Message(), tc.fail) {
					t.Fatalf("FilterNode = %v, want a failure naming %q", st, tc.fail)
				}
				return
			}
			if diff := cmp.Diff(tc.want, cardsOf(allocated(t, d, tc.pod, tc.policy))); diff != "" {
				t.Errorf("cards (-want +got):\n%s", diff)
			}
		})
	}
}

// topologyScores links GPU-0..GPU-3 as two NVLink pairs (0-1 strong, 2-3
// strong) with PCIe between the pairs, and GPU-4 poorly to everything.
const topologyScores = `[` +
	`{"uuid":"GPU-0","score":{"GPU-1":600,"GPU-2":20,"GPU-3":20,"GPU-4":10}},` +
	`{"uuid":"GPU-1","score":{"GPU-0":600,"GPU-2":20,"GPU-3":20,"GPU-4":10}},` +
	`{"uuid":"GPU-2","score":{"GPU-0":20,"GPU-1":20,"GPU-3":400,"GPU-4":10}},` +
	`{"uuid":"GPU-3","score":{"GPU-0":20,"GPU-1":20,"GPU-2":400,"GPU-4":10}},` +
	`{"uuid":"GPU-4","score":{"GPU-0":10,"GPU-1":10,"GPU-2":10,"GPU-3":10}}]`

func TestTopologyAware(t *testing.T) {
	cards := []card{gpu("GPU-0", 16384), gpu("GPU-1", 16384), gpu("GPU-2", 16384), gpu("GPU-3", 16384), gpu("GPU-4", 16384)}
	topo := []string{vgpuproto.AnnotationGPUPolicy, PolicyTopologyAware}
	tests := []struct {
		name   string
		node   *v1.Node
		held   []*v1.Pod
		pod    *v1.Pod
		policy string
		want   []string
	}{
		{name: "two cards take the best-linked pair", node: vgpuNode(cards, vgpuproto.AnnotationHAMiScore, topologyScores),
			pod: one("p", 2, 1000, 0, topo...), want: []string{"GPU-0,GPU-1"}},
		{name: "the best pair must fit", node: vgpuNode(cards, vgpuproto.AnnotationHAMiScore, topologyScores),
			held: []*v1.Pod{placed(one("a", 1, 16000, 0), "GPU-0,NVIDIA,16000,0:")},
			pod:  one("p", 2, 1000, 0, topo...), want: []string{"GPU-2,GPU-3"}},
		{name: "one card takes the worst-linked card", node: vgpuNode(cards, vgpuproto.AnnotationHAMiScore, topologyScores),
			pod: one("p", 1, 1000, 0, topo...), want: []string{"GPU-4"}},
		{name: "four cards maximise the links", node: vgpuNode(cards, vgpuproto.AnnotationHAMiScore, topologyScores),
			pod: one("p", 4, 1000, 0, topo...), want: []string{"GPU-0,GPU-1,GPU-2,GPU-3"}},
		{name: "without scores topology-aware falls back to the node policy", node: vgpuNode(cards),
			held: []*v1.Pod{placed(one("a", 1, 100, 0), "GPU-3,NVIDIA,100,0:")},
			pod:  one("p", 1, 1000, 0, topo...), policy: device.PolicyBinpack, want: []string{"GPU-3"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d := devicesOf(t, newBackend(t), tc.node, tc.held...)
			if diff := cmp.Diff(tc.want, cardsOf(allocated(t, d, tc.pod, tc.policy))); diff != "" {
				t.Errorf("cards (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBinomial(t *testing.T) {
	for _, tc := range []struct{ n, k, want int }{{8, 4, 70}, {5, 0, 1}, {16, 8, 12870}, {64, 32, maxCombinations + 1}} {
		if got := binomial(tc.n, tc.k); got != tc.want {
			t.Errorf("binomial(%d, %d) = %d, want %d", tc.n, tc.k, got, tc.want)
		}
	}
}
