package deploy

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
	"strings"
)

// APICall is one kind of Kubernetes API request the code can make, in the
// terms RBAC rules use.
type APICall struct {
	// Group is the API group ("" for the core group).
	Group string
	// Resource is the resource, with its subresource after a slash
	// (nodes/status, pods/binding).
	Resource string
	// Verb is the request verb (get, list, watch, create, update, patch,
	// delete).
	Verb string
}

func (c APICall) String() string {
	if c.Group == "" {
		return c.Verb + " " + c.Resource
	}
	return c.Verb + " " + c.Group + "/" + c.Resource
}

// APICallSites maps each APICall the non-test Go files of dirs can make to
// the places ("file:line") that make it.
//
// It reads typed clientset calls: client.CoreV1().Pods(ns).Get(...), the
// same with the resource client held in a variable (pods :=
// client.CoreV1().Pods(ns); pods.Watch(...)), Patch with a subresource
// argument, Pods().Bind (create pods/binding), and a resource client handed
// to client-go's event sink (typedcorev1.EventSinkImpl), whose recorder
// creates events and patches repeated ones. Any other use of a clientset,
// and informer factories, dynamic or REST clients, are errors naming the
// place: this scanner's answer is complete or it is not given, so a new
// kind of call cannot slip past the RBAC test that uses it.
func APICallSites(dirs ...string) (map[APICall][]string, error) {
	out := map[APICall][]string{}
	fset := token.NewFileSet()
	for _, dir := range dirs {
		paths, err := goFiles(dir, false)
		if err != nil {
			return nil, err
		}
		for _, p := range paths {
			f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
			if err != nil {
				return nil, fmt.Errorf("parse %s: %w", p, err)
			}
			if err := scanAPICalls(fset, f, out); err != nil {
				return nil, err
			}
		}
	}
	for _, sites := range out {
		sort.Strings(sites)
	}
	return out, nil
}

// groupAccessors are the clientset's group accessors this scanner knows,
// with their API groups.
var groupAccessors = map[string]string{
	"CoreV1": "", "CoordinationV1": "coordination.k8s.io", "AppsV1": "apps",
	"EventsV1": "events.k8s.io", "RbacV1": "rbac.authorization.k8s.io",
	"SchedulingV1beta1": "scheduling.volcano.sh", "AdmissionregistrationV1": "admissionregistration.k8s.io",
}

// unsupportedClients are calls whose requests this scanner cannot tell.
var unsupportedClients = map[string]bool{
	"NewSharedInformerFactory": true, "NewSharedInformerFactoryWithOptions": true,
	"NewFilteredSharedInformerFactory": true, "NewListWatchFromClient": true,
	"NewFilteredListWatchFromClient": true, "RESTClient": true, "Discovery": true,
}

// methodVerbs maps typed resource client methods to request verbs and the
// subresource they address.
var methodVerbs = map[string]struct{ verb, sub string }{
	"Get": {"get", ""}, "List": {"list", ""}, "Watch": {"watch", ""},
	"Create": {"create", ""}, "Update": {"update", ""}, "UpdateStatus": {"update", "status"},
	"Patch": {"patch", ""}, "Apply": {"patch", ""}, "ApplyStatus": {"patch", "status"},
	"Delete": {"delete", ""}, "DeleteCollection": {"deletecollection", ""},
	"Bind": {"create", "binding"}, "Evict": {"create", "eviction"}, "EvictV1": {"create", "eviction"},
}

func scanAPICalls(fset *token.FileSet, f *ast.File, out map[APICall][]string) error {
	var err error
	fail := func(n ast.Node, format string, args ...any) {
		if err == nil {
			err = fmt.Errorf("%s: "+format, append([]any{fset.Position(n.Pos())}, args...)...)
		}
	}
	for _, decl := range f.Decls {
		// parents of every node of the declaration, to see how a resource
		// client is used.
		parents := map[ast.Node]ast.Node{}
		var stack []ast.Node
		ast.Inspect(decl, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return false
			}
			if len(stack) > 0 {
				parents[n] = stack[len(stack)-1]
			}
			stack = append(stack, n)
			return true
		})
		ast.Inspect(decl, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if unsupportedClients[sel.Sel.Name] {
				fail(call, "%s: the API calls it leads to cannot be read from source", sel.Sel.Name)
				return true
			}
			group, ok := groupAccessors[sel.Sel.Name]
			if !ok {
				if strings.HasSuffix(sel.Sel.Name, "V1") || strings.Contains(sel.Sel.Name, "V1beta") {
					if len(call.Args) == 0 && isClientsetLike(sel.X) {
						if g, ok := informerGroup(sel); ok {
							informerUses(fset, call, g, parents, out, fail)
							return true
						}
						fail(call, "unknown API group accessor %s", sel.Sel.Name)
					}
				}
				return true
			}
			res, ok := parents[call].(*ast.SelectorExpr)
			if !ok {
				fail(call, "%s() not followed by a resource", sel.Sel.Name)
				return true
			}
			resCall, ok := parents[res].(*ast.CallExpr)
			if !ok || resCall.Fun != res {
				fail(res, "%s().%s not called", sel.Sel.Name, res.Sel.Name)
				return true
			}
			resource := strings.ToLower(res.Sel.Name)
			at := fset.Position(resCall.Pos())
			site := fmt.Sprintf("%s:%d", at.Filename, at.Line)
			for _, c := range resourceUses(resCall, group, resource, parents, decl, fail) {
				out[c] = append(out[c], site)
			}
			return true
		})
	}
	return err
}

// informerGroups are the group accessors of a SharedInformerFactory
// (factory.Core().V1()), by API group.
var informerGroups = map[string]string{"Core": ""}

// informerGroup reports whether sel is the version accessor of an informer
// factory's group (the V1 of factory.Core().V1()), and which group.
func informerGroup(sel *ast.SelectorExpr) (string, bool) {
	if sel.Sel.Name != "V1" {
		return "", false
	}
	inner, ok := sel.X.(*ast.CallExpr)
	if !ok || len(inner.Args) != 0 {
		return "", false
	}
	gsel, ok := inner.Fun.(*ast.SelectorExpr)
	if !ok {
		return "", false
	}
	g, ok := informerGroups[gsel.Sel.Name]
	return g, ok
}

// informerUses records what an informer of a factory the code is handed
// (factory.Core().V1().Pods(), then .Informer() or .Lister()) stands for:
// the factory's list and watch of that resource. The factory, made
// elsewhere (Volcano's scheduler cache), makes the calls; they are listed so
// the roles are checked against them.
func informerUses(fset *token.FileSet, v1call *ast.CallExpr, group string, parents map[ast.Node]ast.Node,
	out map[APICall][]string, fail func(ast.Node, string, ...any)) {
	res, ok := parents[v1call].(*ast.SelectorExpr)
	if !ok {
		fail(v1call, "informer group not followed by a resource")
		return
	}
	resCall, ok := parents[res].(*ast.CallExpr)
	if !ok || resCall.Fun != res || len(resCall.Args) != 0 {
		fail(res, "informer resource %s not called without arguments", res.Sel.Name)
		return
	}
	at := fset.Position(resCall.Pos())
	site := fmt.Sprintf("%s:%d (informer)", at.Filename, at.Line)
	resource := strings.ToLower(res.Sel.Name)
	for _, verb := range []string{"list", "watch"} {
		c := APICall{Group: group, Resource: resource, Verb: verb}
		out[c] = append(out[c], site)
	}
}

// isClientsetLike reports whether e looks like a clientset value (an
// identifier or a field), not a package name's function.
func isClientsetLike(e ast.Expr) bool {
	switch e.(type) {
	case *ast.Ident, *ast.SelectorExpr, *ast.CallExpr:
		return true
	}
	return false
}

// resourceUses returns the calls made through one resource client
// expression (client.CoreV1().Pods(ns)).
func resourceUses(rc *ast.CallExpr, group, resource string, parents map[ast.Node]ast.Node, decl ast.Decl,
	fail func(ast.Node, string, ...any)) []APICall {
	switch p := parents[rc].(type) {
	case *ast.SelectorExpr: // .Get(...) directly
		if c, ok := methodCall(p, group, resource, parents, fail); ok {
			return []APICall{c}
		}
		return nil
	case *ast.AssignStmt: // pods := ...; pods.Get(...)
		for i, rhs := range p.Rhs {
			if rhs == rc && i < len(p.Lhs) {
				if id, ok := p.Lhs[i].(*ast.Ident); ok {
					return variableUses(id.Name, rc, group, resource, parents, decl, fail)
				}
			}
		}
	case *ast.ValueSpec:
		for i, v := range p.Values {
			if v == rc && i < len(p.Names) {
				return variableUses(p.Names[i].Name, rc, group, resource, parents, decl, fail)
			}
		}
	case *ast.KeyValueExpr: // &typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")}
		if lit, ok := parents[p].(*ast.CompositeLit); ok && resource == "events" {
			if t, ok := lit.Type.(*ast.SelectorExpr); ok && t.Sel.Name == "EventSinkImpl" {
				// client-go's recorder creates an event and patches its
				// count when it repeats (tools/record's recordEvent).
				return []APICall{{group, resource, "create"}, {group, resource, "patch"}}
			}
		}
	}
	fail(rc, "use of the %s client not understood", resource)
	return nil
}

// variableUses returns the calls made through a variable holding a
// resource client, anywhere in the declaration.
func variableUses(name string, rc *ast.CallExpr, group, resource string, parents map[ast.Node]ast.Node, decl ast.Decl,
	fail func(ast.Node, string, ...any)) []APICall {
	var out []APICall
	ast.Inspect(decl, func(n ast.Node) bool {
		id, ok := n.(*ast.Ident)
		if !ok || id.Name != name || parents[id] == nil {
			return true
		}
		switch p := parents[id].(type) {
		case *ast.SelectorExpr:
			if p.X == id {
				if c, ok := methodCall(p, group, resource, parents, fail); ok {
					out = append(out, c)
				}
			}
		case *ast.AssignStmt, *ast.ValueSpec:
			// the declaration itself
		default:
			fail(id, "%s (the %s client) used other than by calling its methods", name, resource)
		}
		return true
	})
	if len(out) == 0 {
		fail(rc, "the %s client in %s is never called", resource, name)
	}
	return out
}

// methodCall reads one method call on a resource client.
func methodCall(sel *ast.SelectorExpr, group, resource string, parents map[ast.Node]ast.Node,
	fail func(ast.Node, string, ...any)) (APICall, bool) {
	call, ok := parents[sel].(*ast.CallExpr)
	if !ok || call.Fun != sel {
		fail(sel, "%s.%s not called", resource, sel.Sel.Name)
		return APICall{}, false
	}
	mv, ok := methodVerbs[sel.Sel.Name]
	if !ok {
		fail(sel, "method %s of the %s client not known", sel.Sel.Name, resource)
		return APICall{}, false
	}
	sub := mv.sub
	if sel.Sel.Name == "Patch" && len(call.Args) > 5 {
		var parts []string
		for _, a := range call.Args[5:] {
			s, ok := stringLit(a)
			if !ok {
				fail(a, "Patch subresource is not a string literal")
				return APICall{}, false
			}
			parts = append(parts, s)
		}
		sub = strings.Join(parts, "/")
	}
	r := resource
	if sub != "" {
		r += "/" + sub
	}
	return APICall{Group: group, Resource: r, Verb: mv.verb}, true
}
