package pluginargs

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/vgpushare/vshare/device"
)

// ArgGPUExclusiveRules is upstream Volcano's argument (volcano-sh/volcano
// pull request #5213, pkg/scheduler/plugins/deviceshare/gpuexclusive.go
// GPUExclusiveRulesKey): a list of rules, each a map of pod label keys to
// values. A pod carrying every label of a rule gets vGPU cards that no
// other pod matching that rule holds; see backends/vgpu (exclusive.go) for
// the semantics.
const ArgGPUExclusiveRules = "deviceshare.GPUExclusiveRules"

// MaxExclusiveRules is the most rules deviceshare.GPUExclusiveRules may
// list (the backend keeps a pod's matches in a 64-bit mask).
const MaxExclusiveRules = 64

// parseExclusiveRules validates deviceshare.GPUExclusiveRules. Upstream
// drops what it cannot read (a non-list, a non-string value, an empty
// rule) without a word; here each is an error naming the rule's index, the
// label and what is allowed, because a silently dropped rule lets pods
// share cards their operator meant to keep apart.
func parseExclusiveRules(raw interface{}) ([]device.ExclusiveRule, field.ErrorList) {
	path := field.NewPath(ArgGPUExclusiveRules)
	if raw == nil {
		return nil, nil
	}
	list, ok := raw.([]interface{})
	if !ok {
		return nil, field.ErrorList{field.Invalid(path, raw,
			`must be a list of rules, each a map of pod label keys to values, for example [{"team": "a", "gpu-exclusive": "true"}]`)}
	}
	if len(list) > MaxExclusiveRules {
		return nil, field.ErrorList{field.TooMany(path, len(list), MaxExclusiveRules)}
	}
	var errs field.ErrorList
	rules := make([]device.ExclusiveRule, 0, len(list))
	for i, item := range list {
		labels, ruleErrs := parseExclusiveRule(path.Index(i), item)
		errs = append(errs, ruleErrs...)
		if len(ruleErrs) == 0 {
			rules = append(rules, device.ExclusiveRule{Labels: labels})
		}
	}
	if len(errs) > 0 || len(rules) == 0 {
		return nil, errs
	}
	return rules, nil
}

func parseExclusiveRule(path *field.Path, item interface{}) (map[string]string, field.ErrorList) {
	entries := map[string]interface{}{}
	switch m := item.(type) {
	case map[string]interface{}:
		entries = m
	case map[interface{}]interface{}:
		for k, v := range m {
			ks, ok := k.(string)
			if !ok {
				return nil, field.ErrorList{field.Invalid(path, item, fmt.Sprintf("label key %v must be a string", k))}
			}
			entries[ks] = v
		}
	default:
		return nil, field.ErrorList{field.Invalid(path, item,
			"must be a map of pod label keys to values (a pod matching all of them matches the rule)")}
	}
	if len(entries) == 0 {
		return nil, field.ErrorList{field.Required(path,
			"a rule needs at least one label key: value (an empty rule would match every pod)")}
	}
	keys := make([]string, 0, len(entries))
	for k := range entries {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	labels := make(map[string]string, len(entries))
	for _, k := range keys {
		if msgs := validation.IsQualifiedName(k); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Key(k), k, "label key: "+strings.Join(msgs, "; ")))
			continue
		}
		v, ok := entries[k].(string)
		if !ok {
			errs = append(errs, field.Invalid(path.Key(k), entries[k],
				"label value must be a string; quote numbers and booleans (\"true\")"))
			continue
		}
		if msgs := validation.IsValidLabelValue(v); len(msgs) > 0 {
			errs = append(errs, field.Invalid(path.Key(k), v, "label value: "+strings.Join(msgs, "; ")))
			continue
		}
		labels[k] = v
	}
	return labels, errs
}

// ExclusiveKey identifies the rules for the backend cache: backends are
// built again when the rules change.
func ExclusiveKey(rules []device.ExclusiveRule) string {
	parts := make([]string, len(rules))
	for i, r := range rules {
		parts[i] = r.String()
	}
	return strings.Join(parts, ";")
}
