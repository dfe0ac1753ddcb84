//go:build e2e

package agentnvml

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// NVMLPackage is go-nvml's package, whose methods the agent calls.
const NVMLPackage = "github.com/NVIDIA/go-nvml/pkg/nvml"

// Method is a method of one of go-nvml's types, as "Device.GetUUID".
type Method string

// AgentMethods returns the go-nvml methods called by the packages matching
// patterns (listed from dir, without their tests), except in packages whose
// path contains one of skip: every NVML call the agent's production code
// can make, found by type, so a call through any interface or helper
// counts and a method of the same name on another type does not.
//
// The packages are type-checked from source against their dependencies'
// export data, which `go list -export` builds (what golang.org/x/tools'
// go/packages does; the module's x/tools predates this Go release).
func AgentMethods(dir string, patterns, skip []string) ([]Method, error) {
	pkgs, err := goList(dir, patterns)
	if err != nil {
		return nil, err
	}
	seen := map[Method]bool{}
	for _, p := range pkgs {
		if p.DepOnly || skipped(p.ImportPath, skip) {
			continue
		}
		info, err := typeCheck(p, pkgs)
		if err != nil {
			return nil, err
		}
		for sel, s := range info.Selections {
			if s.Kind() != types.MethodVal || s.Obj().Pkg() == nil || s.Obj().Pkg().Path() != NVMLPackage {
				continue
			}
			seen[Method(typeName(s.Recv())+"."+sel.Sel.Name)] = true
		}
	}
	out := make([]Method, 0, len(seen))
	for m := range seen {
		out = append(out, m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// listedPackage is what `go list -json` says of a package.
type listedPackage struct {
	ImportPath string
	Dir        string
	GoFiles    []string
	Export     string
	ImportMap  map[string]string
	DepOnly    bool
	Error      *struct{ Err string }
}

// goList lists the packages matching patterns and their dependencies, with
// export data.
func goList(dir string, patterns []string) (map[string]*listedPackage, error) {
	cmd := exec.Command("go", append([]string{"list", "-e", "-export", "-deps", "-json"}, patterns...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %v: %w: %s", patterns, err, stderr.String())
	}
	pkgs := map[string]*listedPackage{}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		p := &listedPackage{}
		if err := dec.Decode(p); err != nil {
			return nil, fmt.Errorf("go list %v: %w", patterns, err)
		}
		if p.Error != nil {
			return nil, fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs, nil
}

// typeCheck type-checks p from source, importing its dependencies from
// their export data.
func typeCheck(p *listedPackage, pkgs map[string]*listedPackage) (*types.Info, error) {
	fset := token.NewFileSet()
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", p.ImportPath, err)
		}
		files = append(files, f)
	}
	lookup := func(path string) (io.ReadCloser, error) {
		dep, ok := pkgs[path]
		if !ok || dep.Export == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(dep.Export)
	}
	imp := importer.ForCompiler(fset, "gc", lookup).(types.ImporterFrom)
	conf := types.Config{Importer: mappedImporter{imp, p.ImportMap}}
	info := &types.Info{Selections: map[*ast.SelectorExpr]*types.Selection{}}
	if _, err := conf.Check(p.ImportPath, fset, files, info); err != nil {
		return nil, fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	return info, nil
}

// mappedImporter resolves import paths through the package's ImportMap
// (vendoring), as the go command does.
type mappedImporter struct {
	types.ImporterFrom
	importMap map[string]string
}

func (m mappedImporter) Import(path string) (*types.Package, error) {
	return m.ImportFrom(path, "", 0)
}

func (m mappedImporter) ImportFrom(path, dir string, mode types.ImportMode) (*types.Package, error) {
	if mapped, ok := m.importMap[path]; ok {
		path = mapped
	}
	return m.ImporterFrom.ImportFrom(path, dir, mode)
}

func skipped(path string, skip []string) bool {
	for _, s := range skip {
		if strings.Contains(path, s) {
			return true
		}
	}
	return false
}

// typeName is the name of a (pointer to a) named type.
func typeName(t types.Type) string {
	if p, ok := t.(*types.Pointer); ok {
		t = p.Elem()
	}
	if n, ok := t.(*types.Named); ok {
		return n.Obj().Name()
	}
	return t.String()
}

// Binder resolves go-nvml's methods to the C symbols they call, from
// go-nvml's source: a method's body, the package functions it calls, the
// cgo calls (C.nvml...) they make. go-nvml binds versioned entry points at
// Init: a variable such as nvmlDeviceGetPciInfo starts as the _v1 wrapper
// and updateVersionedSymbols replaces it with a newer one for each newer
// symbol the library exports (dlsym). Binder follows the same rule for a
// given set of exported symbols.
type Binder struct {
	funcs map[string]*ast.FuncDecl // "name" or "recvType.name"
	vars  map[string]string        // package variable -> its initial function
	// versions are updateVersionedSymbols' replacements, in order.
	versions []replacement
}

// replacement is one "if Lookup(symbol) succeeds, variable = function";
// an empty symbol always applies.
type replacement struct{ symbol, variable, function string }

// implementations are go-nvml's types behind its interfaces.
var implementations = map[string]string{"Interface": "library", "Device": "nvmlDevice",
	"EventSet": "nvmlEventSet", "GpuInstance": "nvmlGpuInstance", "ComputeInstance": "nvmlComputeInstance"}

// NewBinder parses go-nvml's package source in dir.
func NewBinder(dir string) (*Binder, error) {
	fset := token.NewFileSet()
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("read go-nvml source: %w", err)
	}
	b := &Binder{funcs: map[string]*ast.FuncDecl{}, vars: map[string]string{}}
	for _, e := range ents {
		name := e.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, fmt.Errorf("parse go-nvml source: %w", err)
		}
		b.add(f)
	}
	if len(b.versions) == 0 {
		return nil, fmt.Errorf("go-nvml source in %s: no updateVersionedSymbols found", dir)
	}
	return b, nil
}

// add records a file's functions, function variables and, from
// updateVersionedSymbols, the versioned replacements.
func (b *Binder) add(f *ast.File) {
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			key := d.Name.Name
			if d.Recv != nil && len(d.Recv.List) == 1 {
				key = recvName(d.Recv.List[0].Type) + "." + key
			}
			b.funcs[key] = d
			switch key {
			case "library.load":
				// Loading binds some variables unconditionally, such as
				// errorStringFunc = nvmlErrorString (what Return.Error
				// calls, so any error printed or wrapped with %w).
				b.versions = append(loadBindings(d.Body), b.versions...)
			case "library.updateVersionedSymbols":
				b.versions = append(b.versions, replacements(d.Body)...)
			}
		case *ast.GenDecl:
			for _, s := range d.Specs {
				vs, ok := s.(*ast.ValueSpec)
				if !ok || len(vs.Names) != 1 || len(vs.Values) != 1 {
					continue
				}
				if id, ok := vs.Values[0].(*ast.Ident); ok {
					b.vars[vs.Names[0].Name] = id.Name
				}
			}
		}
	}
}

func recvName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// loadBindings reads the assignments `variable = function` of library.load.
func loadBindings(body *ast.BlockStmt) []replacement {
	var out []replacement
	for _, st := range body.List {
		as, ok := st.(*ast.AssignStmt)
		if !ok || len(as.Lhs) != 1 || len(as.Rhs) != 1 {
			continue
		}
		v, ok1 := as.Lhs[0].(*ast.Ident)
		fn, ok2 := as.Rhs[0].(*ast.Ident)
		if ok1 && ok2 {
			out = append(out, replacement{variable: v.Name, function: fn.Name})
		}
	}
	return out
}

// replacements reads the sequence `err = l.dl.Lookup("sym"); if err == nil
// { variable = function }` of updateVersionedSymbols.
func replacements(body *ast.BlockStmt) []replacement {
	var out []replacement
	symbol := ""
	for _, st := range body.List {
		switch st := st.(type) {
		case *ast.AssignStmt:
			if call, ok := st.Rhs[0].(*ast.CallExpr); ok && len(call.Args) == 1 {
				if lit, ok := call.Args[0].(*ast.BasicLit); ok {
					symbol, _ = strconv.Unquote(lit.Value)
				}
			}
		case *ast.IfStmt:
			for _, inner := range st.Body.List {
				as, ok := inner.(*ast.AssignStmt)
				if !ok {
					continue
				}
				v, ok1 := as.Lhs[0].(*ast.Ident)
				fn, ok2 := as.Rhs[0].(*ast.Ident)
				if ok1 && ok2 && symbol != "" {
					out = append(out, replacement{symbol: symbol, variable: v.Name, function: fn.Name})
				}
			}
		}
	}
	return out
}

// Symbols returns the C symbols method m calls once a library exporting
// exported is loaded, sorted. Method is "Type.Name" with Type an interface
// of go-nvml (Device) or one of its types (Return).
func (b *Binder) Symbols(m Method, exported map[string]bool) ([]string, error) {
	typ, name, _ := strings.Cut(string(m), ".")
	if impl, ok := implementations[typ]; ok {
		typ = impl
	}
	root, ok := b.funcs[typ+"."+name]
	if !ok {
		return nil, fmt.Errorf("%s: no method %s.%s in go-nvml", m, typ, name)
	}
	syms := map[string]bool{}
	b.walk(root, typ, exported, syms, map[*ast.FuncDecl]bool{})
	out := make([]string, 0, len(syms))
	for s := range syms {
		out = append(out, s)
	}
	sort.Strings(out)
	return out, nil
}

// bound is the function a versioned variable holds with those exports.
func (b *Binder) bound(variable string, exported map[string]bool) string {
	fn := b.vars[variable]
	for _, r := range b.versions {
		if r.variable == variable && (r.symbol == "" || exported[r.symbol]) {
			fn = r.function
		}
	}
	return fn
}

// walk collects the C symbols fn calls, directly or through the package's
// functions, the methods of its own receiver type and the versioned
// variables.
func (b *Binder) walk(fn *ast.FuncDecl, recvType string, exported, syms map[string]bool, seen map[*ast.FuncDecl]bool) {
	if fn == nil || fn.Body == nil || seen[fn] {
		return
	}
	seen[fn] = true
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		fun := call.Fun
		if ix, ok := fun.(*ast.IndexListExpr); ok { // generic instantiation
			fun = ix.X
		} else if ix, ok := fun.(*ast.IndexExpr); ok {
			fun = ix.X
		}
		switch f := fun.(type) {
		case *ast.SelectorExpr:
			if x, ok := f.X.(*ast.Ident); ok && x.Name == "C" {
				if strings.HasPrefix(f.Sel.Name, "nvml") {
					syms[f.Sel.Name] = true
				}
				return true
			}
			if m := b.funcs[recvType+"."+f.Sel.Name]; m != nil {
				b.walk(m, recvType, exported, syms, seen)
				return true
			}
			// A method of another of go-nvml's types (a library wrapper
			// calling device.GetName()): any type with that method.
			for _, impl := range implementations {
				b.walk(b.funcs[impl+"."+f.Sel.Name], impl, exported, syms, seen)
			}
		case *ast.Ident:
			name := f.Name
			if _, isVar := b.vars[name]; isVar {
				name = b.bound(name, exported)
			}
			b.walk(b.funcs[name], recvType, exported, syms, seen)
		}
		return true
	})
}
