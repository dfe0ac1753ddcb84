package request

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/backends/internal/testkit"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func newParser(t *testing.T, rules ...device.ExclusiveRule) *Parser {
	t.Helper()
	cfg := config.Default().NVIDIA
	p, err := NewParser(&cfg, rules)
	if err != nil {
		t.Fatalf("NewParser: %v", err)
	}
	return p
}

// vpod is a pod with one container asking for n cards of mem MiB.
func vpod(name string, n, mem int64, annotations ...string) *v1.Pod {
	return testkit.Pod(name, []v1.ResourceList{testkit.Limits(map[v1.ResourceName]int64{
		config.DefaultResourceCountName: n, config.DefaultResourceMemoryName: mem})}, annotations...)
}

func TestNewParserRefuses(t *testing.T) {
	many := make([]device.ExclusiveRule, 65)
	for i := range many {
		many[i] = device.ExclusiveRule{Labels: map[string]string{"k": "v"}}
	}
	tests := []struct {
		name  string
		cfg   func(*config.NVIDIAConfig)
		rules []device.ExclusiveRule
		want  string
	}{
		{name: "negative default memory", cfg: func(c *config.NVIDIAConfig) { c.DefaultMemory = -1 },
			want: "vgpu options: nvidia.defaultMemory=-1: want 0 to"},
		{name: "default cores above a card", cfg: func(c *config.NVIDIAConfig) { c.DefaultCores = 101 },
			want: "vgpu options: nvidia.defaultCores=101: want 0 to 100"},
		{name: "default card count above the limit", cfg: func(c *config.NVIDIAConfig) { c.DefaultGPUNum = vgpuproto.MaxCards + 1 },
			want: "vgpu options: nvidia.defaultGPUNum="},
		{name: "more rules than bits", rules: many, want: "vgpu options: 65 exclusive rules: want at most 64"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config.Default().NVIDIA
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			_, err := NewParser(&cfg, tc.rules)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewParser: %v, want an error containing %q", err, tc.want)
			}
		})
	}
	cfg := config.Default().NVIDIA
	cfg.GPUMemoryFactor = 0
	if p, err := NewParser(&cfg, nil); err != nil || p.Factor != 1 {
		t.Errorf("gpuMemoryFactor 0: factor %v, %v; want 1", p, err)
	}
}

// TestKey checks that the key tells requests apart by everything the card
// choice reads, and by nothing else.
func TestKey(t *testing.T) {
	p := newParser(t, device.ExclusiveRule{Labels: map[string]string{"team": "a"}})
	parse := func(pod *v1.Pod, policy string) *Pod {
		t.Helper()
		var r Pod
		if err := p.Parse(pod, policy, &r); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	base := parse(vpod("p", 1, 1000), device.PolicyBinpack)
	same := vpod("q", 1, 1000)
	same.Spec.Containers[0].Resources.Requests = v1.ResourceList{v1.ResourceCPU: resource.MustParse("2")}
	if r := parse(same, device.PolicyBinpack); r.Key != base.Key || r.Host.CPUMilli != 2000 {
		t.Errorf("another pod asking the same with more CPU: key %q (want %q), host %+v", r.Key, base.Key, r.Host)
	}
	labelled := vpod("l", 1, 1000)
	labelled.Labels = map[string]string{"team": "a"}
	for name, r := range map[string]*Pod{
		"more memory":  parse(vpod("p", 1, 2000), device.PolicyBinpack),
		"more cards":   parse(vpod("p", 2, 1000), device.PolicyBinpack),
		"spread":       parse(vpod("p", 1, 1000), device.PolicySpread),
		"mode":         parse(vpod("p", 1, 1000, vgpuproto.AnnotationMode, vgpuproto.ModeMIG), device.PolicyBinpack),
		"numa":         parse(vpod("p", 1, 1000, vgpuproto.AnnotationNUMABind, "true"), device.PolicyBinpack),
		"type":         parse(vpod("p", 1, 1000, vgpuproto.AnnotationUseType, "a100"), device.PolicyBinpack),
		"exclusive":    parse(labelled, device.PolicyBinpack),
		"podgroup":     parse(vpod("p", 1, 1000, vgpuproto.AnnotationPodGroupPolicy, vgpuproto.PodGroupPolicySpread, AnnotationGroupName, "g"), device.PolicyBinpack),
		"card policy":  parse(vpod("p", 1, 1000, vgpuproto.AnnotationGPUPolicy, PolicyTopologyAware), device.PolicyBinpack),
		"uuid exclude": parse(vpod("p", 1, 1000, vgpuproto.AnnotationNoUseUUID, "GPU-0"), device.PolicyBinpack),
	} {
		if r.Key == base.Key {
			t.Errorf("%s: same key %q as the base request", name, r.Key)
		}
	}
	// Two pods alike but for whether an init container asking for no card
	// is a sidecar: the phases the others run in differ (Roles).
	withInits := func(sidecar bool) *Pod {
		pod := vpod("i", 1, 1000)
		asking := *pod.Spec.Containers[0].DeepCopy()
		asking.Name = "init-asking"
		quiet := v1.Container{Name: "init-quiet"}
		if sidecar {
			always := v1.ContainerRestartPolicyAlways
			quiet.RestartPolicy = &always
		}
		pod.Spec.InitContainers = []v1.Container{asking, quiet}
		return parse(pod, device.PolicyBinpack)
	}
	if plain, side := withInits(false), withInits(true); plain.Key == side.Key {
		t.Errorf("init container without cards, regular %v or sidecar %v: same key %q", plain.Roles, side.Roles, plain.Key)
	}
	if r := parse(labelled, device.PolicyBinpack); r.Rules != 1 {
		t.Errorf("rules of a pod matching rule 0 = %b, want 1", r.Rules)
	}
	if r := parse(vpod("p", 1, 1000, vgpuproto.AnnotationUseType, "a100"), device.PolicyBinpack); r.UseType != "A100" {
		t.Errorf("use-gputype = %q, want it upper-cased", r.UseType)
	}
}

func TestPodGang(t *testing.T) {
	if g := PodGang(vpod("p", 1, 1, AnnotationGroupName, "pg")); g != "ns/pg" {
		t.Errorf("PodGang = %q, want ns/pg", g)
	}
	if g := PodGang(vpod("p", 1, 1)); g != "" {
		t.Errorf("PodGang without a PodGroup = %q, want empty", g)
	}
}
