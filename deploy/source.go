package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
)

// The functions below read Go source, not compiled values, because what
// they look for (string constants by name, metric names built from a
// prefix) cannot be listed by reflection. Tests use them to check that the
// documentation and the dashboard name only things the code has, and
// everything it has.

// goFiles returns the non-test Go files under dir (recursively when
// recursive is set), skipping testdata directories.
func goFiles(dir string, recursive bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != dir && (!recursive || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			out = append(out, path)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("list Go files in %s: %w", dir, err)
	}
	return out, nil
}

func parseFiles(dir string, recursive bool) ([]*ast.File, error) {
	paths, err := goFiles(dir, recursive)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	var files []*ast.File
	for _, p := range paths {
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", p, err)
		}
		files = append(files, f)
	}
	return files, nil
}

// StringConstants returns the string constants declared with a literal
// value in the non-test Go files under dir whose names start with
// namePrefix, keyed by "<file's package>.<name>".
func StringConstants(dir string, recursive bool, namePrefix string) (map[string]string, error) {
	files, err := parseFiles(dir, recursive)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, f := range files {
		eachStringConst(f, func(name, value string) {
			if strings.HasPrefix(name, namePrefix) {
				out[f.Name.Name+"."+name] = value
			}
		})
	}
	return out, nil
}

// eachStringConst calls fn with every constant the file declares with a
// literal string value.
func eachStringConst(f *ast.File, fn func(name, value string)) {
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if i >= len(vs.Values) {
					continue
				}
				if s, ok := stringLit(vs.Values[i]); ok {
					fn(name.Name, s)
				}
			}
		}
	}
}

// MetricNames returns the Prometheus metric names the non-test Go files
// under dirs define: the literal names given to prometheus.NewDesc and to
// the Name field of prometheus' *Opts, and names built as
// <prefix constant> + "literal", where the prefix constant's name ends in
// "Prefix" (deviceshare's metricsPrefix), whether the literal is added
// directly or passed to a one-line helper that adds it.
func MetricNames(dirs ...string) (map[string]bool, error) {
	out := map[string]bool{}
	for _, dir := range dirs {
		files, err := parseFiles(dir, false)
		if err != nil {
			return nil, err
		}
		prefixes := map[string]string{}
		for _, f := range files {
			eachStringConst(f, func(name, value string) {
				if strings.HasSuffix(name, "Prefix") && strings.HasSuffix(value, "_") {
					prefixes[name] = value
				}
			})
		}
		for _, f := range files {
			collectMetricNames(f, prefixes, out)
		}
	}
	return out, nil
}

func collectMetricNames(f *ast.File, prefixes map[string]string, out map[string]bool) {
	// helpers are functions whose body prefixes one of their parameters.
	helpers := map[string]string{}
	ast.Inspect(f, func(n ast.Node) bool {
		switch x := n.(type) {
		case *ast.BinaryExpr:
			id, ok := x.X.(*ast.Ident)
			if !ok || x.Op != token.ADD {
				return true
			}
			prefix, ok := prefixes[id.Name]
			if !ok {
				return true
			}
			if s, ok := stringLit(x.Y); ok {
				out[prefix+s] = true
			}
		case *ast.AssignStmt:
			// desc := func(name, ...) { ... metricsPrefix+name ... }
			if len(x.Lhs) != 1 || len(x.Rhs) != 1 {
				return true
			}
			id, ok := x.Lhs[0].(*ast.Ident)
			lit, isFunc := x.Rhs[0].(*ast.FuncLit)
			if !ok || !isFunc {
				return true
			}
			ast.Inspect(lit.Body, func(m ast.Node) bool {
				if b, ok := m.(*ast.BinaryExpr); ok {
					if p, ok := b.X.(*ast.Ident); ok && prefixes[p.Name] != "" {
						helpers[id.Name] = prefixes[p.Name]
					}
				}
				return true
			})
		case *ast.CallExpr:
			if fn, ok := x.Fun.(*ast.Ident); ok && helpers[fn.Name] != "" && len(x.Args) > 0 {
				if s, ok := stringLit(x.Args[0]); ok {
					out[helpers[fn.Name]+s] = true
				}
			}
			if sel, ok := x.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "NewDesc" && len(x.Args) > 0 {
				if s, ok := stringLit(x.Args[0]); ok {
					out[s] = true
				}
			}
		case *ast.KeyValueExpr:
			if k, ok := x.Key.(*ast.Ident); ok && k.Name == "Name" {
				if s, ok := stringLit(x.Value); ok {
					out[s] = true
				}
			}
		}
		return true
	})
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}
