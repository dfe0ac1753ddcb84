package deploy

import (
	"reflect"
	"strings"

	"github.com/vgpushare/vshare/config"
)

// ConfigPaths lists the device document's field paths from the config
// types' json tags, list elements marked with "[]", e.g.
// "nvidia.knownMigGeometries[].allowedGeometries[].geometries[].memory".
func ConfigPaths() []string {
	var out []string
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := range t.NumField() {
			f := t.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if !f.IsExported() || name == "-" || name == "" {
				continue
			}
			p := prefix + name
			ft := f.Type
			for ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Slice {
				p += "[]"
				ft = ft.Elem()
			}
			out = append(out, p)
			walk(ft, p+".")
		}
	}
	walk(reflect.TypeFor[config.Config](), "")
	return out
}
