package kubectlvshare

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/vgpushare/vshare/kubectlvshare/report"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// decode runs the plugin and decodes its JSON (or YAML) report.
func decode[R any](t *testing.T, format string, args ...string) (R, int) {
	t.Helper()
	var rep R
	code, out, errOut := newFakeEnv(t).run(append(args, "-o", format)...)
	var err error
	if format == report.FormatYAML {
		err = yaml.UnmarshalStrict([]byte(out), &rep)
	} else {
		err = json.Unmarshal([]byte(out), &rep)
	}
	if err != nil {
		t.Fatalf("%s output does not decode: %v\n%s\nstderr: %s", format, err, out, errOut)
	}
	return rep, code
}

func TestCardsReport(t *testing.T) {
	for _, format := range []string{report.FormatJSON, report.FormatYAML} {
		t.Run(format, func(t *testing.T) {
			rep, code := decode[report.CardReport](t, format, "cards")
			if code != ExitOK || rep.Kind != report.KindCards || rep.APIVersion != report.APIVersion {
				t.Fatalf("exit %d, kind %q, apiVersion %q", code, rep.Kind, rep.APIVersion)
			}
			nodes := map[string]report.NodeCards{}
			for _, n := range rep.Nodes {
				nodes[n.Name] = n
			}
			want := report.Card{Device: "hamivgpu", Index: 0, ID: "GPU-a0", Model: "NVIDIA-A100-SXM4-40GB", Healthy: true,
				MemoryUsedMiB: 20000, MemoryTotalMiB: 40960, CoresUsed: 60, CoresTotal: 100, Shares: 2, MaxShares: 10,
				Pods: []report.CardHolder{{Namespace: "team", Name: "infer-0", MemoryMiB: 12000, Cores: 40}, {Namespace: "team", Name: "infer-1", MemoryMiB: 8000, Cores: 20}}}
			if diff := cmp.Diff(want, nodes["gpu-a"].Cards[0]); diff != "" {
				t.Errorf("gpu-a card 0 (-want +got):\n%s", diff)
			}
			if got := nodes["gpu-mig"].Cards[0]; got.Layout != "mig group1: 1g.5gb x1 of 7 instances" || got.MemoryUsedMiB != 5120 {
				t.Errorf("MIG card = %+v, want one 1g.5gb instance (5120 MiB) in group1", got)
			}
			if got := nodes["npu-0"].Cards[0]; got.Device != "Ascend910B3" || got.Layout != "vir05_1c_16g x2" || got.Shares != 2 {
				t.Errorf("Ascend chip = %+v, want two vir05_1c_16g vNPUs", got)
			}
			if !nodes["gpu-b"].Cordoned || len(nodes["gpu-b"].Errors) != 1 || nodes["gpu-b"].Errors[0].Pod != "team/bad" {
				t.Errorf("gpu-b = %+v, want cordoned with team/bad's allocation as an error", nodes["gpu-b"])
			}
			if errs := nodes["gpu-broken"].Errors; len(errs) != 1 || errs[0].Pod != "" || len(nodes["gpu-broken"].Cards) != 0 {
				t.Errorf("gpu-broken = %+v, want no cards and its registration as an error", nodes["gpu-broken"])
			}
			wantTotals := []report.Totals{
				{Device: "hamivgpu", Cards: 8, IdleCards: 2, MemoryUsedMiB: 106120, MemoryTotalMiB: 278528, CoresUsed: 170, CoresTotal: 800, Shares: 7, Pods: 6},
				{Device: "Ascend910B3", Cards: 2, IdleCards: 1, MemoryUsedMiB: 32768, MemoryTotalMiB: 131072, CoresUsed: 10, CoresTotal: 40, Shares: 2, Pods: 2},
			}
			if diff := cmp.Diff(wantTotals, rep.Totals); diff != "" {
				t.Errorf("cluster totals (-want +got):\n%s", diff)
			}
		})
	}
}

func TestPodsReport(t *testing.T) {
	rep, _ := decode[report.PodReport](t, report.FormatJSON, "pods")
	byName := map[string]report.PodCards{}
	for _, p := range rep.Pods {
		byName[p.Name] = p
	}
	if _, ok := byName["mig-0"]; ok {
		t.Error("pods without -A listed another namespace's pod")
	}
	want := report.PodCards{Namespace: "team", Name: "train-0", Phase: "Running", Node: "gpu-a", Devices: []string{"hamivgpu"},
		Cards: []report.HeldCard{
			{Device: "hamivgpu", Index: 1, ID: "GPU-a1", Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 30000, Cores: 50},
			{Device: "hamivgpu", Index: 2, ID: "GPU-a2", Model: "NVIDIA-A100-SXM4-40GB", MemoryMiB: 30000, Cores: 50},
		}, BindPhase: "success", Admitted: admittedYes}
	if diff := cmp.Diff(want, byName["train-0"]); diff != "" {
		t.Errorf("train-0 (-want +got):\n%s", diff)
	}
	if p := byName["refused"]; p.Admitted != admittedNo || p.AdmissionMessage != "VGPUAllocationFailed: allocation names card GPU-b1 not registered" {
		t.Errorf("refused = %+v, want not admitted with the agent's event", p)
	}
	if p := byName["bad"]; len(p.Errors) != 1 || len(p.Cards) != 0 || p.Admitted != admittedPending {
		t.Errorf("bad = %+v, want its malformed allocation as an error and no cards", p)
	}
	if p := byName["waiter"]; p.Node != "" || p.Admitted != "" || p.Waiting == "" {
		t.Errorf("waiter = %+v, want unbound with the scheduler's message", p)
	}
	if p := byName["npu-infer-1"]; len(p.Cards) != 1 || p.Cards[0].Device != "Ascend910B3" || p.BindPhase != "success" {
		t.Errorf("npu-infer-1 = %+v, want one Ascend910B3 chip, bind phase success", p)
	}
	all, _ := decode[report.PodReport](t, report.FormatJSON, "pods", "-A")
	if len(all.Pods) != len(rep.Pods)+1 {
		t.Errorf("pods -A lists %d pods, want the %d of team and other/mig-0", len(all.Pods), len(rep.Pods))
	}
}

func TestFitReport(t *testing.T) {
	rep, code := decode[report.FitReport](t, report.FormatJSON, "fit", "--memory", "20000", "--cores", "30", "--number", "2", "--type", "A100")
	if code != ExitOK || !rep.Fits || rep.Device != "hamivgpu" || rep.Policy != "binpack" {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
	fits := map[string]report.NodeFit{}
	for _, n := range rep.Nodes {
		fits[n.Name] = n
	}
	if n := fits["gpu-a"]; !n.Fits || len(n.Chosen) != 2 || n.Score <= 0 {
		t.Errorf("gpu-a = %+v, want two chosen cards and a score", n)
	}
	if n := fits["gpu-b"]; n.Fits || n.Reasons[0] != reasonCordoned {
		t.Errorf("gpu-b = %+v, want refused as cordoned first", n)
	}
	none, code := decode[report.FitReport](t, report.FormatJSON, "fit", "--memory", "39000", "--number", "2")
	if code != ExitNoFit || none.Fits {
		t.Fatalf("two 39000 MiB cards: exit %d, fits %v; want %d and false", code, none.Fits, ExitNoFit)
	}
	for _, n := range none.Nodes {
		if n.Name != "gpu-a" {
			continue
		}
		want := []report.CardVerdict{
			{Index: 0, ID: "GPU-a0", Reason: "insufficient vGPU memory on card", Resolvable: true, MemoryFreeMiB: 20960, CoresFree: 40},
			{Index: 1, ID: "GPU-a1", Reason: "insufficient vGPU memory on card", Resolvable: true, MemoryFreeMiB: 10960, CoresFree: 50},
			{Index: 2, ID: "GPU-a2", Reason: "insufficient vGPU memory on card", Resolvable: true, MemoryFreeMiB: 10960, CoresFree: 50},
			{Index: 3, ID: "GPU-a3", Reason: "insufficient vGPU memory on card", Resolvable: true, MemoryFreeMiB: 20960, CoresFree: 90},
			{Index: 4, ID: "GPU-a4", Reason: "vGPU card unhealthy", MemoryFreeMiB: 40960, CoresFree: 100},
		}
		if diff := cmp.Diff(want, n.Cards); diff != "" {
			t.Errorf("gpu-a card verdicts (-want +got):\n%s", diff)
		}
		if !n.Resolvable {
			t.Error("gpu-a is resolvable: pods leaving would free the memory")
		}
	}
}

func TestWhyReport(t *testing.T) {
	rep, code := decode[report.WhyReport](t, report.FormatJSON, "why", "waiter")
	if code != ExitOK || !rep.Waiting || rep.PodGroup == nil || rep.PodGroup.Name != "pg-waiter" {
		t.Fatalf("exit %d, report %+v", code, rep)
	}
	wantRecorded := []report.RecordedReason{
		{Nodes: 1, Reason: "hamivgpu device registration on the node is invalid"}, {Nodes: 1, Reason: "node(s) were unschedulable"},
		{Nodes: 2, Reason: "hamivgpu devices are not present on the node"}, {Nodes: 1, Reason: "insufficient vGPU memory on card"},
		{Nodes: 1, Reason: "vGPU card unhealthy"},
	}
	if diff := cmp.Diff(wantRecorded, rep.Recorded); diff != "" {
		t.Errorf("recorded reasons (-want +got):\n%s", diff)
	}
	if len(rep.Events) != 2 || rep.Events[1].Object != "podgroup/pg-waiter" {
		t.Errorf("events = %+v, want the pod's and then the PodGroup's", rep.Events)
	}
	wantFree := []report.FreeUp{
		{Node: "gpu-a", Device: "hamivgpu", Pods: []report.CardHolder{{Namespace: "team", Name: "notebook", MemoryMiB: 20000, Cores: 10}},
			Cards: []report.CardRef{{Index: 3, ID: "GPU-a3"}}},
		{Node: "gpu-mig", Device: "hamivgpu", Pods: []report.CardHolder{{Namespace: "other", Name: "mig-0", MemoryMiB: 5120}},
			Cards: []report.CardRef{{Index: 0, ID: "GPU-m0"}}},
	}
	if diff := cmp.Diff(wantFree, rep.FreeUp); diff != "" {
		t.Errorf("free up (-want +got):\n%s", diff)
	}
	bound, _ := decode[report.WhyReport](t, report.FormatYAML, "why", "pod/infer-0")
	if bound.Waiting || bound.Node != "gpu-a" || len(bound.Nodes) != 0 {
		t.Errorf("a bound pod: %+v, want not waiting and no node analysis", bound)
	}
}

func TestParseHistogram(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want []report.RecordedReason
	}{
		{msg: "no histogram here", want: nil},
		{msg: "0/2 nodes are unavailable: 2 insufficient vGPU memory on card.",
			want: []report.RecordedReason{{Nodes: 2, Reason: "insufficient vGPU memory on card"}}},
		{msg: "1/1 tasks in gang unschedulable: pod group is not ready, 1 Pending, 1 minAvailable; Pending: 1 Unschedulable. " +
			"Origin reason is g-0: 0/3 nodes are unavailable: 1 NPU card cannot hold the template next to its other vNPUs (AI cores, AI CPUs or DVPP), 2 node(s) resource fit failed.",
			want: []report.RecordedReason{{Nodes: 1, Reason: "NPU card cannot hold the template next to its other vNPUs (AI cores, AI CPUs or DVPP)"},
				{Nodes: 2, Reason: "node(s) resource fit failed"}}},
	} {
		if diff := cmp.Diff(tc.want, parseHistogram(tc.msg)); diff != "" {
			t.Errorf("parseHistogram(%q) (-want +got):\n%s", tc.msg, diff)
		}
	}
}

// TestNodeLevelBlockers: a cordoned node and one the pod's nodeSelector
// excludes do not fit whatever their cards hold, and freeing pods there
// would not help.
func TestNodeLevelBlockers(t *testing.T) {
	kinds, err := newKinds(nil)
	if err != nil {
		t.Fatal(err)
	}
	var vk *kind
	for _, k := range kinds {
		if k.name() == "hamivgpu" {
			vk = k
		}
	}
	n := node("gpu-x", vgpuproto.AnnotationRegister, vgpuproto.EncodeRegister([]vgpuproto.Card{a100("GPU-x0", true)}))
	n.Labels = map[string]string{"zone": "a"}
	pod := vgpuPod("team", "p", 1, 1, 1000, 0, "", "", "")
	for _, tc := range []struct {
		name     string
		cordon   bool
		selector map[string]string
		want     []string
	}{
		{name: "fits"},
		{name: "cordoned", cordon: true, want: []string{reasonCordoned}},
		{name: "selector", selector: map[string]string{"zone": "b"}, want: []string{reasonSelector}},
		{name: "both", cordon: true, selector: map[string]string{"gpu": "yes"}, want: []string{reasonCordoned, reasonSelector}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := n.DeepCopy()
			n.Spec.Unschedulable = tc.cordon
			p := pod.DeepCopy()
			p.Spec.NodeSelector = tc.selector
			nf := nodeFit(accountNode([]*kind{vk}, n, nil), vk, p, "binpack")
			if nf.Fits != (tc.want == nil) || nf.Resolvable {
				t.Errorf("fits %v resolvable %v, want fits %v and never resolvable", nf.Fits, nf.Resolvable, tc.want == nil)
			}
			if diff := cmp.Diff(tc.want, nf.Reasons); diff != "" {
				t.Errorf("reasons (-want +got):\n%s", diff)
			}
		})
	}
}
