package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	v1 "k8s.io/api/core/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// PlainManifests and the other paths are relative to this directory (the
// tests of this package and its subpackages find them from theirs).
const (
	PlainManifests = "manifests/vshare.yaml"
	ChartValues    = "helm/vshare/values.yaml"
	ChartSchema    = "helm/vshare/values.schema.json"
	Dashboard      = "dashboards/vshare.json"
)

// Manifest is one document of a multi-document YAML file, as JSON.
type Manifest struct {
	Kind string
	Raw  json.RawMessage
}

// ReadManifests splits a multi-document YAML file into its documents,
// skipping empty ones.
func ReadManifests(path string) ([]Manifest, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []Manifest
	for i := 0; ; i++ {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		var meta struct{ Kind string }
		if err := json.Unmarshal(raw, &meta); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, i, err)
		}
		out = append(out, Manifest{Kind: meta.Kind, Raw: raw})
	}
}

// OfKind decodes the documents of the given kind into values of T.
func OfKind[T any](ms []Manifest, kind string) ([]T, error) {
	var out []T
	for _, m := range ms {
		if m.Kind != kind {
			continue
		}
		var v T
		if err := json.Unmarshal(m.Raw, &v); err != nil {
			return nil, fmt.Errorf("decode %s: %w", kind, err)
		}
		out = append(out, v)
	}
	return out, nil
}

// ConfigMapWith returns the one ConfigMap among ms holding the data key.
func ConfigMapWith(ms []Manifest, key string) (v1.ConfigMap, error) {
	cms, err := OfKind[v1.ConfigMap](ms, "ConfigMap")
	if err != nil {
		return v1.ConfigMap{}, err
	}
	var found []v1.ConfigMap
	for _, cm := range cms {
		if _, ok := cm.Data[key]; ok {
			found = append(found, cm)
		}
	}
	if len(found) != 1 {
		return v1.ConfigMap{}, fmt.Errorf("want one ConfigMap with the key %s, found %d", key, len(found))
	}
	return found[0], nil
}

// Values reads a Helm values file and returns the object at path (keys),
// or the whole tree for no path.
func Values(file string, path ...string) (map[string]any, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	var tree map[string]any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	for i, p := range path {
		next, ok := tree[p].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: no object at %s", file, strings.Join(path[:i+1], "."))
		}
		tree = next
	}
	return tree, nil
}
