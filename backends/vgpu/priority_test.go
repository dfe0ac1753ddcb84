package vgpu

import (
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vgpushare/vshare/config"
)

// withPriority returns a one-card pod whose container asks for priority
// value under resource name res.
func withPriority(res, value string) *v1.Pod {
	p := one("p", 1, 1000, 30)
	p.Spec.Containers[0].Resources.Limits[v1.ResourceName(res)] = resource.MustParse(value)
	return p
}

func TestPriorityAccepted(t *testing.T) {
	for _, v := range []string{"0", "1"} {
		if err := newBackend(t).ValidateRequest(withPriority("volcano.sh/vgpu-priority", v)); err != nil {
			t.Errorf("priority %s: %v", v, err)
		}
	}
	// HAMi's name, once the operator configures it.
	hami := newBackend(t, func(c *config.NVIDIAConfig) { c.ResourcePriorityName = "nvidia.com/priority" })
	if err := hami.ValidateRequest(withPriority("nvidia.com/priority", "0")); err != nil {
		t.Errorf("nvidia.com/priority=0 with resourcePriorityName nvidia.com/priority: %v", err)
	}
}

func TestPriorityOutOfRangeRefused(t *testing.T) {
	for _, tc := range []struct{ res, value, cfgName string }{
		{"volcano.sh/vgpu-priority", "2", ""},
		{"volcano.sh/vgpu-priority", "-1", ""},
		{"volcano.sh/vgpu-priority", "0.5", ""},
		{"volcano.sh/vgpu-priority", "100k", ""},
		{"nvidia.com/priority", "5", "nvidia.com/priority"},
	} {
		t.Run(tc.res+"="+tc.value, func(t *testing.T) {
			b := newBackend(t, func(c *config.NVIDIAConfig) {
				if tc.cfgName != "" {
					c.ResourcePriorityName = tc.cfgName
				}
			})
			err := b.ValidateRequest(withPriority(tc.res, tc.value))
			if err == nil {
				t.Fatal("ValidateRequest accepted the pod")
			}
			q := resource.MustParse(tc.value)
			for _, s := range []string{"pod ns/p", `container "c0"`, tc.res + "=" + q.String(), "want 0 (high priority) or 1 (low priority)"} {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not contain %q", err, s)
				}
			}
		})
	}
}

// A priority under a name the backend is not configured with is not its
// business (HAMi's nvidia.com/priority on a volcano.sh-named setup).
func TestPriorityOtherNameIgnored(t *testing.T) {
	if err := newBackend(t).ValidateRequest(withPriority("nvidia.com/priority", "7")); err != nil {
		t.Errorf("nvidia.com/priority=7 without resourcePriorityName nvidia.com/priority: %v", err)
	}
}
