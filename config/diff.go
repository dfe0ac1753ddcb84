package config

import (
	"fmt"
	"reflect"
	"strings"
)

// maxChangedPaths bounds the change summary written to the log.
const maxChangedPaths = 20

// ChangedPaths lists the document paths whose values differ between two
// configurations, like "nvidia.deviceSplitCount" or "vnpus.configs[2]"
// (a list that changed length is reported as a whole; an absent list equals
// an empty one). Fields that are not part of the document (IgnoredSections,
// ListForm) are not compared. The result is empty exactly when the two
// configurations are equivalent; for logs it is cut after 20 entries, ending
// with "...".
func ChangedPaths(a, b *Config) []string {
	if a == nil || b == nil {
		if a != b {
			return []string{"<all>"}
		}
		return nil
	}
	var out []string
	diffValue(reflect.ValueOf(*a), reflect.ValueOf(*b), "", &out)
	if len(out) > maxChangedPaths {
		out = append(out[:maxChangedPaths], "...")
	}
	return out
}

func diffValue(a, b reflect.Value, path string, out *[]string) {
	if len(*out) > maxChangedPaths {
		return
	}
	switch a.Kind() {
	case reflect.Struct:
		t := a.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" {
				continue
			}
			if path != "" {
				name = path + "." + name
			}
			diffValue(a.Field(i), b.Field(i), name, out)
		}
	case reflect.Slice:
		if a.Len() != b.Len() {
			*out = append(*out, path)
			return
		}
		for i := range a.Len() {
			diffValue(a.Index(i), b.Index(i), fmt.Sprintf("%s[%d]", path, i), out)
		}
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			if a.IsNil() != b.IsNil() {
				*out = append(*out, path)
			}
			return
		}
		diffValue(a.Elem(), b.Elem(), path, out)
	default:
		if !a.Equal(b) {
			*out = append(*out, path)
		}
	}
}
