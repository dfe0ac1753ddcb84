package mindcluster

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/protocol/mindclusterproto"
)

func TestValidateRequest(t *testing.T) {
	b := newBackend(t, Options{})
	withLabel := func(p *v1.Pod, k, v string) *v1.Pod {
		if v == "" {
			delete(p.Labels, k)
		} else {
			p.Labels[k] = v
		}
		return p
	}
	twoContainers := corePod("two", 1)
	twoContainers.Spec.Containers = append(twoContainers.Spec.Containers, v1.Container{Name: "side",
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{mindclusterproto.ResourceNPUCore: resource.MustParse("2")}}})
	initAsks := corePod("init", 1)
	initAsks.Spec.InitContainers = []v1.Container{{Name: "setup",
		Resources: v1.ResourceRequirements{Limits: v1.ResourceList{mindclusterproto.ResourceNPUCore: resource.MustParse("1")}}}}
	fractional := corePod("frac", 1)
	fractional.Spec.Containers[0].Resources.Limits[mindclusterproto.ResourceNPUCore] = resource.MustParse("1500m")
	tests := []struct {
		name string
		pod  *v1.Pod
		// want lists substrings of the error; none means valid.
		want []string
	}{
		{name: "vNPU", pod: corePod("a", 2, mindclusterproto.LabelVNPULevel, "high", mindclusterproto.LabelVNPUDVPP, "no")},
		{name: "dvpp null", pod: corePod("a", 4, mindclusterproto.LabelVNPUDVPP, "null")},
		{name: "whole chips", pod: corePod("a", 16)},
		{name: "cores not served by a 8-core chip are a node matter", pod: corePod("a", 20)},
		{name: "no label", pod: withLabel(corePod("a", 1), mindclusterproto.LabelRingController, ""),
			want: []string{`container "main"`, "huawei.com/npu-core", `ring-controller.atlas=""`, `want "ascend-310P"`}},
		{name: "910 label", pod: withLabel(corePod("a", 1), mindclusterproto.LabelRingController, "ascend-910"),
			want: []string{`ring-controller.atlas="ascend-910"`, "ascend-310P"}},
		{name: "bad level", pod: corePod("a", 1, mindclusterproto.LabelVNPULevel, "medium"), want: []string{`vnpu-level="medium"`, "low or high"}},
		{name: "bad dvpp", pod: corePod("a", 4, mindclusterproto.LabelVNPUDVPP, "maybe"), want: []string{`vnpu-dvpp="maybe"`, "yes, no"}},
		{name: "three cores", pod: corePod("a", 3), want: []string{`container "main"`, "huawei.com/npu-core=3", "want 1, 2 or 4"}},
		{name: "seven cores", pod: corePod("a", 7), want: []string{"huawei.com/npu-core=7", "whole chips"}},
		{name: "fractional", pod: fractional, want: []string{`container "main"`, "huawei.com/npu-core=1500m", "whole number"}},
		{name: "negative", pod: corePod("a", -1), want: []string{"huawei.com/npu-core=-1", "[0, 4096]"}},
		{name: "two containers", pod: twoContainers, want: []string{`"main" and "side"`, "one container"}},
		{name: "init container", pod: initAsks, want: []string{`init container "setup"`, "huawei.com/npu-core=1"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if !b.HasDeviceRequest(tc.pod) {
				t.Fatal("HasDeviceRequest = false")
			}
			err := b.ValidateRequest(tc.pod)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("ValidateRequest: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateRequest accepted the pod, want an error with %q", tc.want)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

func TestHasDeviceRequest(t *testing.T) {
	b := newBackend(t, Options{})
	zero := corePod("zero", 0)
	plain := corePod("plain", 1)
	plain.Spec.Containers[0].Resources = v1.ResourceRequirements{}
	for _, p := range []*v1.Pod{zero, plain} {
		if b.HasDeviceRequest(p) {
			t.Errorf("%s: HasDeviceRequest = true", p.Name)
		}
		if err := b.ValidateRequest(p); err != nil {
			t.Errorf("%s: ValidateRequest: %v", p.Name, err)
		}
	}
}
