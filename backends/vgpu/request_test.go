package vgpu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

func TestParseRequest(t *testing.T) {
	tests := []struct {
		name   string
		cfg    func(*config.NVIDIAConfig)
		pod    *v1.Pod
		policy string
		want   []request.Container
	}{
		{name: "memory alone implies defaultGPUNum cards", pod: vpod("p", []ctr{{n: -1, mem: 2000, pct: -1, cores: -1}}),
			want: []request.Container{{Nums: 1, MemMiB: 2000}}},
		{name: "neither memory nor percentage is the whole card", pod: vpod("p", []ctr{{n: 2, mem: -1, pct: -1, cores: 30}}),
			want: []request.Container{{Nums: 2, Pct: 100, Cores: 30}}},
		{name: "percentage", pod: vpod("p", []ctr{{n: 1, mem: -1, pct: 50, cores: -1}}),
			want: []request.Container{{Nums: 1, Pct: 50}}},
		{name: "memory wins over percentage", pod: vpod("p", []ctr{{n: 1, mem: 100, pct: 50, cores: -1}}),
			want: []request.Container{{Nums: 1, MemMiB: 100}}},
		{name: "cores alone implies one card", pod: vpod("p", []ctr{{n: -1, mem: -1, pct: -1, cores: 20}}),
			want: []request.Container{{Nums: 1, Pct: 100, Cores: 20}}},
		{name: "gpuMemoryFactor scales memory", cfg: func(c *config.NVIDIAConfig) { c.GPUMemoryFactor = 1024 },
			pod: one("p", 1, 3, -1), want: []request.Container{{Nums: 1, MemMiB: 3072}}},
		{name: "config defaults", cfg: func(c *config.NVIDIAConfig) { c.DefaultMemory, c.DefaultCores, c.DefaultGPUNum = 4096, 25, 2 },
			pod:  vpod("p", []ctr{{n: -1, mem: -1, pct: -1, cores: 0}, {n: 1, mem: -1, pct: -1, cores: -1}}),
			want: []request.Container{{Entry: 1, Nums: 1, MemMiB: 4096, Cores: 25}}},
		{name: "containers without requests are skipped", pod: vpod("p", []ctr{{-1, -1, -1, -1}, {n: 1, mem: 10, pct: -1, cores: -1}}),
			want: []request.Container{{Entry: 1, Nums: 1, MemMiB: 10}}},
		{name: "no request", pod: vpod("p", []ctr{{-1, -1, -1, -1}})},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t)
			if tc.cfg != nil {
				b = newBackend(t, tc.cfg)
			}
			var r request.Pod
			err := b.parse(tc.pod, tc.policy, &r)
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			if diff := cmp.Diff(tc.want, r.Ctrs(), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("containers (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParsePolicies(t *testing.T) {
	tests := []struct {
		name           string
		global         string
		annotations    []string
		wantCard, node string
		wantNUMA       bool
		wantGang       string
	}{
		{name: "global binpack", global: device.PolicyBinpack, wantCard: device.PolicyBinpack, node: device.PolicyBinpack},
		{name: "empty global is binpack", wantCard: device.PolicyBinpack, node: device.PolicyBinpack},
		{name: "pod overrides card and node policy", global: device.PolicyBinpack,
			annotations: []string{vgpuproto.AnnotationGPUPolicy, device.PolicySpread, vgpuproto.AnnotationNodePolicy, device.PolicySpread},
			wantCard:    device.PolicySpread, node: device.PolicySpread},
		{name: "topology-aware", global: device.PolicySpread, annotations: []string{vgpuproto.AnnotationGPUPolicy, PolicyTopologyAware},
			wantCard: PolicyTopologyAware, node: device.PolicySpread},
		{name: "numa bind and gang spread", annotations: []string{vgpuproto.AnnotationNUMABind, "true",
			vgpuproto.AnnotationPodGroupPolicy, vgpuproto.PodGroupPolicySpread, AnnotationGroupName, "pg"},
			wantCard: device.PolicyBinpack, node: device.PolicyBinpack, wantNUMA: true, wantGang: "ns/pg"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r request.Pod
			err := newBackend(t).parse(one("p", 1, 10, 0, tc.annotations...), tc.global, &r)
			if err != nil {
				t.Fatal(err)
			}
			got := []any{r.CardPolicy, r.NodePolicy, r.NUMABind, r.Gang}
			if diff := cmp.Diff([]any{tc.wantCard, tc.node, tc.wantNUMA, tc.wantGang}, got); diff != "" {
				t.Errorf("card policy, node policy, numa, gang (-want +got):\n%s", diff)
			}
		})
	}
}

func TestValidateRequestRefuses(t *testing.T) {
	frac := one("p", 1, 10, 0)
	frac.Spec.Containers[0].Resources.Limits["volcano.sh/vgpu-memory"] = resource.MustParse("0.5")
	neg := one("p", 1, 10, 0)
	neg.Spec.Containers[0].Resources.Limits["volcano.sh/vgpu-number"] = resource.MustParse("-2")
	tests := []struct {
		name string
		cfg  func(*config.NVIDIAConfig)
		pod  *v1.Pod
		want []string
	}{
		{name: "cores above 100", pod: one("p", 1, 10, 101), want: []string{`container "c0"`, "volcano.sh/vgpu-cores=101", "[0, 100]"}},
		{name: "percentage above 100", pod: vpod("p", []ctr{{1, -1, 150, -1}}), want: []string{"vgpu-memory-percentage=150"}},
		{name: "negative count", pod: neg, want: []string{"vgpu-number=-2"}},
		{name: "fractional memory", pod: frac, want: []string{"vgpu-memory=500m", "whole number"}},
		{name: "too many cards", pod: one("p", 100000, 10, 0), want: []string{"vgpu-number=100k"}},
		{name: "count 0 with memory", pod: one("p", 0, 10, 0), want: []string{"vgpu-number=0 with vGPU memory"}},
		{name: "memory without count when defaultGPUNum is 0", cfg: func(c *config.NVIDIAConfig) { c.DefaultGPUNum = 0 },
			pod: vpod("p", []ctr{{-1, 10, -1, -1}}), want: []string{"nvidia.defaultGPUNum is 0"}},
		{name: "init container's value", pod: withInit(one("p", 1, 10, 0), "i", ctr{1, -1, -1, 101}),
			want: []string{`init container "i0"`, "volcano.sh/vgpu-cores=101"}},
		{name: "fewer cards than an init container leaves for reuse", pod: withInit(one("p", 1, 10, 0), "i", ctr{2, -1, -1, -1}),
			want: []string{`container "c0": volcano.sh/vgpu-number=1`, `init container "i0"`, "want 0 or at least 2"}},
		{name: "a later init container asking for fewer", pod: withInit(one("p", 2, 10, 0), "ii", ctr{2, -1, -1, -1}, ctr{1, -1, -1, -1}),
			want: []string{`init container "i1": volcano.sh/vgpu-number=1`, `init container "i0"`, "want 0 or at least 2"}},
		{name: "a sidecar asking for fewer", pod: withInit(one("p", 1, 10, 0), "is", ctr{3, -1, -1, -1}, ctr{1, -1, -1, -1}),
			want: []string{`init container "s1": volcano.sh/vgpu-number=1`, "want 0 or at least 3"}},
		{name: "unknown mode", pod: one("p", 1, 10, 0, vgpuproto.AnnotationMode, "mps2"), want: []string{vgpuproto.AnnotationMode, `"mps2"`}},
		{name: "unknown card policy", pod: one("p", 1, 10, 0, vgpuproto.AnnotationGPUPolicy, "least"), want: []string{vgpuproto.AnnotationGPUPolicy, "topology-aware"}},
		{name: "unknown node policy", pod: one("p", 1, 10, 0, vgpuproto.AnnotationNodePolicy, "x"), want: []string{vgpuproto.AnnotationNodePolicy}},
		{name: "numa bind not a bool", pod: one("p", 1, 10, 0, vgpuproto.AnnotationNUMABind, "maybe"), want: []string{vgpuproto.AnnotationNUMABind, "true or false"}},
		{name: "unknown podgroup policy", pod: one("p", 1, 10, 0, vgpuproto.AnnotationPodGroupPolicy, "pack"), want: []string{vgpuproto.AnnotationPodGroupPolicy}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newBackend(t)
			if tc.cfg != nil {
				b = newBackend(t, tc.cfg)
			}
			if !b.HasDeviceRequest(tc.pod) {
				t.Fatalf("HasDeviceRequest = false, want true so the request reaches ValidateRequest")
			}
			err := b.ValidateRequest(tc.pod)
			if err == nil {
				t.Fatal("ValidateRequest accepted the pod")
			}
			for _, s := range append(tc.want, "pod ns/p") {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

func TestRenamedResources(t *testing.T) {
	b := newBackend(t, func(c *config.NVIDIAConfig) {
		c.ResourceCountName, c.ResourceMemoryName = "example.com/gpu", "example.com/gpumem"
	})
	p := vpod("p", nil)
	p.Spec.Containers = []v1.Container{{Name: "c", Resources: v1.ResourceRequirements{Limits: v1.ResourceList{
		"example.com/gpu": resource.MustParse("2"), "example.com/gpumem": resource.MustParse("1000")}}}}
	if !b.HasDeviceRequest(p) || newBackend(t).HasDeviceRequest(p) {
		t.Fatal("only the backend configured with the renamed resources recognises the pod")
	}
	var r request.Pod
	err := b.parse(p, "", &r)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]request.Container{{Nums: 2, MemMiB: 1000}}, r.Ctrs()); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// parse keeps its last result for the same pod object; a new
// resourceVersion, another object or another policy parses again.
func TestParseCacheFollowsThePod(t *testing.T) {
	b := newBackend(t)
	pod := one("p", 1, 1000, 10)
	pod.ResourceVersion = "1"
	var r request.Pod
	if err := b.parse(pod, device.PolicyBinpack, &r); err != nil || r.CardPolicy != device.PolicyBinpack {
		t.Fatalf("parse: %v, card policy %q", err, r.CardPolicy)
	}
	if err := b.parse(pod, device.PolicySpread, &r); err != nil || r.CardPolicy != device.PolicySpread {
		t.Fatalf("another policy: %v, card policy %q", err, r.CardPolicy)
	}
	updated := pod.DeepCopy()
	updated.ResourceVersion = "2"
	updated.Annotations[vgpuproto.AnnotationMode] = "turbo"
	if err := b.parse(updated, device.PolicySpread, &r); err == nil {
		t.Fatalf("the updated pod's bad mode was not seen")
	}
	if err := b.parse(pod, device.PolicySpread, &r); err != nil || r.Ctrs()[0].MemMiB != 1000 {
		t.Fatalf("the first object again: %v, %+v", err, r.Ctrs())
	}
	pod.ResourceVersion = "3"
	pod.Annotations[vgpuproto.AnnotationMode] = "turbo"
	if err := b.parse(pod, device.PolicySpread, &r); err == nil {
		t.Fatalf("a new resourceVersion of the same object was not parsed again")
	}
}
