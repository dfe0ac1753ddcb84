package device

import (
	"sort"
	"strings"
)

// ExclusiveRule is one entry of the plugin argument
// deviceshare.GPUExclusiveRules: label key=value pairs. A pod carrying all
// of them matches the rule, and the vGPU backend keeps pods that match a
// same rule off each other's cards (see backends/vgpu). Upstream:
// volcano-sh/volcano pkg/scheduler/plugins/deviceshare/gpuexclusive.go
// (exclusiveRule, podMatchesRule).
type ExclusiveRule struct {
	// Labels are the pairs a pod must all carry; never empty once parsed.
	Labels map[string]string
}

// Matches reports whether labels carry every pair of the rule.
func (r ExclusiveRule) Matches(labels map[string]string) bool {
	if len(r.Labels) == 0 {
		return false
	}
	for k, v := range r.Labels {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// String renders the rule as sorted "key=value" pairs joined by ",".
func (r ExclusiveRule) String() string {
	pairs := make([]string, 0, len(r.Labels))
	for k, v := range r.Labels {
		pairs = append(pairs, k+"="+v)
	}
	sort.Strings(pairs)
	return strings.Join(pairs, ",")
}
