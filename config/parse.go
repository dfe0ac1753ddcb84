package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"

	v1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// ErrMissingKey is returned (wrapped) by FromConfigMap when the ConfigMap has
// no ConfigKey.
var ErrMissingKey = errors.New("device config key missing")

// Parse reads a device-config.yaml document. It is strict: an unknown key or
// a value of the wrong type anywhere is an error naming its path (keys are
// case-sensitive, duplicate keys are rejected). Keys the document leaves out
// get their defaults, and the result is validated. An empty document yields
// Default().
//
// The errors are field.ErrorList aggregates (k8s.io/apimachinery's
// utilerrors.Aggregate), wrapped with the step that failed; each entry reads
// like "nvidia.deviceSplitCount: Invalid value: 0: must be between 1 and 1000".
func Parse(data []byte) (*Config, error) {
	jsonData, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, fmt.Errorf("parse device config: invalid YAML: %w", err)
	}
	tree, err := decodeTree(jsonData)
	if err != nil {
		return nil, fmt.Errorf("parse device config: %w", err)
	}
	if tree == nil {
		return Default(), nil
	}
	root, ok := tree.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("parse device config: the document must be a mapping with the sections nvidia, vnpus and nodeconfig, got %s", describe(tree))
	}

	ignoredNames := ignoredSections()
	var ignored []string
	for k := range root {
		if ignoredNames[k] {
			ignored = append(ignored, k)
			delete(root, k)
		}
	}
	sort.Strings(ignored)

	if errs := checkShape(reflect.TypeFor[Config](), root, nil); len(errs) > 0 {
		return nil, fmt.Errorf("parse device config: %w", errs.ToAggregate())
	}
	// The shape is known to fit, so this decode only moves values; it
	// cannot meet an unknown key or a type mismatch.
	filtered, err := json.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("parse device config: re-encode document: %w", err)
	}
	c := decodeTarget()
	if err := json.Unmarshal(filtered, c); err != nil {
		return nil, fmt.Errorf("parse device config: decode: %w", err)
	}
	c.applyDefaults()
	c.IgnoredSections = ignored
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("validate device config: %w", err)
	}
	return c, nil
}

// decodeTree decodes JSON into maps, slices and json.Number values, so the
// shape check sees integers exactly as written.
func decodeTree(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var tree any
	if err := dec.Decode(&tree); err != nil {
		return nil, fmt.Errorf("decode document: %w", err)
	}
	return tree, nil
}

func describe(v any) string {
	switch v.(type) {
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	default:
		return fmt.Sprintf("%T", v)
	}
}

// FromConfigMap parses the ConfigKey entry of the ConfigMap (Data, or
// BinaryData when Data lacks it). A ConfigMap without the key is an error
// wrapping ErrMissingKey that names the namespace, name and key.
func FromConfigMap(cm *v1.ConfigMap) (*Config, error) {
	if cm == nil {
		return nil, fmt.Errorf("read device config: nil ConfigMap")
	}
	data, ok := configData(cm)
	if !ok {
		return nil, fmt.Errorf("read device config from ConfigMap %s/%s: key %q not found (keys present: %v): %w",
			cm.Namespace, cm.Name, ConfigKey, dataKeys(cm), ErrMissingKey)
	}
	c, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("read device config from ConfigMap %s/%s key %s: %w", cm.Namespace, cm.Name, ConfigKey, err)
	}
	return c, nil
}

func configData(cm *v1.ConfigMap) ([]byte, bool) {
	if s, ok := cm.Data[ConfigKey]; ok {
		return []byte(s), true
	}
	b, ok := cm.BinaryData[ConfigKey]
	return b, ok
}

func dataKeys(cm *v1.ConfigMap) []string {
	keys := make([]string, 0, len(cm.Data)+len(cm.BinaryData))
	for k := range cm.Data {
		keys = append(keys, k)
	}
	for k := range cm.BinaryData {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
