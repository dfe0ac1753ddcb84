package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// The shape check walks the decoded YAML tree alongside the Go types before
// anything is decoded into them. encoding/json (and the strict decoders built
// on it) stop at the first type error and lose list indexes in the paths it
// reports; walking the tree ourselves reports every unknown key and every
// wrongly typed value at once, with paths like vnpus[2].templates[0].memory,
// which is what an operator fixing a ConfigMap needs.

// shapeChecker is implemented by the types whose YAML shape the generic walk
// cannot describe: the two forms of vnpus and of a MIG geometry, and log
// levels written as numbers or strings.
type shapeChecker interface {
	checkShape(v any, p *field.Path) field.ErrorList
}

// shapeDesc renders a list or an object in an error message.
type shapeDesc string

func (s shapeDesc) String() string { return string(s) }

// checkShape reports every place where the decoded JSON value v does not fit
// the Go type t: unknown keys (matching is case-sensitive), wrong kinds and
// integers out of range. A null value fits anything (it means "absent").
func checkShape(t reflect.Type, v any, p *field.Path) field.ErrorList {
	if v == nil {
		return nil
	}
	if reflect.PointerTo(t).Implements(reflect.TypeFor[shapeChecker]()) {
		return reflect.New(t).Interface().(shapeChecker).checkShape(v, p)
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkShape(t.Elem(), v, p)
	case reflect.Struct:
		return checkObject(t, v, p)
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			return wrongType(p, v, "must be a list")
		}
		var errs field.ErrorList
		for i, item := range list {
			errs = append(errs, checkShape(t.Elem(), item, p.Index(i))...)
		}
		return errs
	case reflect.String:
		switch v.(type) {
		case string:
		case bool:
			return wrongType(p, v, "must be a string; quote it, YAML reads y, yes, on, n, no and off as booleans")
		default:
			return wrongType(p, v, "must be a string")
		}
	case reflect.Bool:
		if _, ok := v.(bool); !ok {
			return wrongType(p, v, "must be true or false")
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return checkInt(t, v, p)
	case reflect.Float32, reflect.Float64:
		n, ok := v.(json.Number)
		if !ok {
			return wrongType(p, v, "must be a number")
		}
		if _, err := n.Float64(); err != nil {
			return wrongType(p, v, "must be a finite number")
		}
	default:
		return field.ErrorList{field.InternalError(p, fmt.Errorf("no shape check for Go type %s", t))}
	}
	return nil
}

func checkInt(t reflect.Type, v any, p *field.Path) field.ErrorList {
	n, ok := v.(json.Number)
	if !ok {
		return wrongType(p, v, "must be an integer")
	}
	_, err := strconv.ParseInt(n.String(), 10, t.Bits())
	if errors.Is(err, strconv.ErrSyntax) {
		return wrongType(p, v, "must be an integer")
	}
	if err != nil {
		lo, hi := -(int64(1) << (t.Bits() - 1)), int64(1)<<(t.Bits()-1)-1
		if t.Bits() == 64 {
			lo, hi = math.MinInt64, math.MaxInt64
		}
		return wrongType(p, v, fmt.Sprintf("must be an integer between %d and %d", lo, hi))
	}
	return nil
}

// checkObject checks a JSON object against a struct's json-tagged fields.
func checkObject(t reflect.Type, v any, p *field.Path) field.ErrorList {
	obj, ok := v.(map[string]any)
	if !ok {
		return wrongType(p, v, "must be an object")
	}
	fields := jsonFields(t)
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var errs field.ErrorList
	for _, k := range keys {
		ft, known := fields[k]
		if !known {
			errs = append(errs, unknownField(p.Child(k), k, fields))
			continue
		}
		errs = append(errs, checkShape(ft, obj[k], p.Child(k))...)
	}
	return errs
}

// jsonFields maps the JSON keys of a struct to the Go types of their fields.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := make(map[string]reflect.Type, t.NumField())
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// unknownField reports a key the type does not have, suggesting the known
// key it most likely meant (upstream spells the same setting deviceSplitCount
// in nvidia: and devicesplitcount in nodeconfig:).
func unknownField(p *field.Path, key string, fields map[string]reflect.Type) *field.Error {
	known := make([]string, 0, len(fields))
	for k := range fields {
		known = append(known, k)
	}
	sort.Strings(known)
	best, bestDistance := "", len(key)/3+1
	for _, k := range known {
		if normalizeKey(k) == normalizeKey(key) {
			return field.Forbidden(p, fmt.Sprintf("unknown field (keys are case-sensitive); did you mean %q?", k))
		}
		if d := editDistance(k, key); d < bestDistance {
			best, bestDistance = k, d
		}
	}
	if best != "" {
		return field.Forbidden(p, fmt.Sprintf("unknown field; did you mean %q?", best))
	}
	return field.Forbidden(p, fmt.Sprintf("unknown field; known fields: [%s]", strings.Join(known, " ")))
}

func normalizeKey(k string) string {
	return strings.ToLower(strings.NewReplacer("-", "", "_", "").Replace(k))
}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// wrongType reports a value of the wrong kind, showing scalars as written.
func wrongType(p *field.Path, v any, detail string) field.ErrorList {
	var shown any
	switch x := v.(type) {
	case map[string]any:
		shown = shapeDesc("{...}")
	case []any:
		shown = shapeDesc("[...]")
	case json.Number:
		shown = shapeDesc(x.String())
	default:
		shown = x
	}
	return field.ErrorList{field.Invalid(p, shown, detail)}
}

func (v *VNPUs) checkShape(x any, p *field.Path) field.ErrorList {
	switch x.(type) {
	case []any:
		return checkShape(reflect.TypeFor[[]VNPUConfig](), x, p)
	case map[string]any:
		return checkShape(reflect.TypeFor[vnpusObject](), x, p)
	default:
		return wrongType(p, x, "must be a list of chip entries or an object with hamiVnpuCore and configs")
	}
}

func (g *MIGGeometry) checkShape(x any, p *field.Path) field.ErrorList {
	switch x.(type) {
	case []any:
		return checkShape(reflect.TypeFor[[]MIGTemplate](), x, p)
	case map[string]any:
		return checkShape(reflect.TypeFor[migGeometryObject](), x, p)
	default:
		return wrongType(p, x, "must be an object with group and geometries, or a list of MIG templates")
	}
}

func (l *LogLevel) checkShape(x any, p *field.Path) field.ErrorList {
	switch x.(type) {
	case string, json.Number:
		return nil
	default:
		return wrongType(p, x, "must be a log level from 0 to 4")
	}
}
