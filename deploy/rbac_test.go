package deploy_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"

	"github.com/vgpushare/vshare/deploy"
)

// component is one of our binaries and the ServiceAccount the chart runs it
// under.
type component struct {
	pkg, serviceAccount string
	// skipRoles are roles bound to the ServiceAccount that are not ours to
	// check: Volcano's scheduler ClusterRole, copied verbatim from its chart
	// for Volcano's own code in the same binary.
	skipRoles map[string]bool
	// notGranted are calls the source can reach that are deliberately not
	// granted, each with the reason the code never makes them.
	notGranted map[deploy.APICall]string
}

var components = []component{
	{pkg: "./cmd/vc-scheduler", serviceAccount: "volcano-scheduler", skipRoles: map[string]bool{"ClusterRole/volcano-scheduler": true},
		notGranted: map[deploy.APICall]string{
			{Resource: "pods", Verb: "list"}: "deviceshare/bind/podwatch.go reads Volcano's own pod informer (Session.InformerFactory), " +
				"which Volcano's scheduler cache lists and watches under Volcano's ClusterRole",
			{Resource: "pods", Verb: "watch"}: "deviceshare/bind/podwatch.go reads Volcano's own pod informer (Session.InformerFactory), " +
				"which Volcano's scheduler cache lists and watches under Volcano's ClusterRole",
			{Resource: "pods", Verb: "get"}: "Volcano's ClusterRole grants it: deviceshare/bind/serial.go gets a pod only when Volcano's " +
				"pod informer does not have it (gone), and nodelock's podGone only before a lock takeover",
		}},
	{pkg: "./cmd/vgpu-device-plugin", serviceAccount: "vgpu-device-plugin", notGranted: map[deploy.APICall]string{
		{Resource: "events", Verb: "patch"}: "client-go's recorder patches only an event recorded twice; the agent records " +
			"at most one per pod and message (allocate.Allocator.fail marks the pod failed, warn records once per pod)",
	}},
	{pkg: "./cmd/vshare-webhook", serviceAccount: "vshare-webhook"},
}

// TestRBACGrantsExactlyTheCallsInTheSource reads every Kubernetes API call
// in the source of this module's packages linked into each binary, and the
// rules the plain manifests (the chart's defaults) bind to the binary's
// ServiceAccount: every call is granted, and every granted verb is one a
// call needs. The comparison is by group, resource[/subresource] and verb;
// namespaces and resourceNames are checked against the API server in
// e2e/rbac_test.go, which runs the binaries under these ServiceAccounts.
func TestRBACGrantsExactlyTheCallsInTheSource(t *testing.T) {
	ms, err := deploy.ReadManifests(deploy.PlainManifests)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range components {
		t.Run(c.serviceAccount, func(t *testing.T) {
			dirs := moduleDirs(t, c.pkg)
			calls, err := deploy.APICallSites(dirs...)
			if err != nil {
				t.Fatal(err)
			}
			granted := grantsTo(t, ms, c)
			for call, sites := range calls {
				_, ok := granted[call]
				switch why, exempt := c.notGranted[call]; {
				case exempt && ok:
					t.Errorf("%s is granted to %s, although the code never makes it (%s)", call, c.serviceAccount, why)
				case exempt:
					t.Logf("%s (%s) is not granted: %s", call, strings.Join(sites, ", "), why)
				case !ok:
					t.Errorf("%s (%s) is not granted to %s", call, strings.Join(sites, ", "), c.serviceAccount)
				}
			}
			for g, role := range granted {
				if _, ok := calls[g]; !ok {
					t.Errorf("%s granted by %s is not called by %s's code", g, role, c.pkg)
				}
			}
			keys := make([]string, 0, len(calls))
			for call := range calls {
				keys = append(keys, call.String())
			}
			sort.Strings(keys)
			t.Logf("%s: %d packages, %d kinds of call, %d granted verbs: %s", c.pkg, len(dirs), len(calls), len(granted),
				strings.Join(keys, "; "))
		})
	}
}

// TestAPICallScannerRefusesWhatItCannotRead: a clientset call the scanner
// cannot classify is an error, not a silent omission.
func TestAPICallScannerRefusesWhatItCannotRead(t *testing.T) {
	for name, src := range map[string]string{
		"informer factory":                  `informers.NewSharedInformerFactory(client, 0)`,
		"REST client":                       `client.CoreV1().RESTClient().Get()`,
		"client passed on":                  `use(client.CoreV1().Pods("ns"))`,
		"unknown method":                    `client.CoreV1().Pods("ns").Frobnicate(ctx)`,
		"patch subresource from a variable": `client.CoreV1().Nodes().Patch(ctx, "n", pt, data, opts, sub)`,
	} {
		dir := t.TempDir()
		writeGo(t, dir, "package p\nfunc f() {\n"+src+"\n}\n")
		if _, err := deploy.APICallSites(dir); err == nil {
			t.Errorf("%s: no error for %s", name, src)
		}
	}
	dir := t.TempDir()
	writeGo(t, dir, `package p
func f() {
	client.CoreV1().Nodes().Patch(ctx, "n", pt, data, opts, "status")
	pods := client.CoreV1().Pods(ns)
	pods.Get(ctx, "p", opts)
	go func() { pods.Watch(ctx, opts) }()
	client.CoreV1().Pods(ns).Bind(ctx, b, opts)
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
}
`)
	want := "create events; create pods/binding; get pods; patch events; patch nodes/status; watch pods"
	if got := scannedCalls(t, dir); got != want {
		t.Errorf("calls = %s, want %s", got, want)
	}
}

// moduleDirs lists the directories of this module's packages that pkg
// links in.
func moduleDirs(t *testing.T, pkg string) []string {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", pkg)
	cmd.Dir = ".."
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps %s: %v", pkg, err)
	}
	return strings.Fields(string(out))
}

// grantsTo returns the (group, resource, verb) triples the manifests'
// roles bound to the component's ServiceAccount grant, each with the role
// granting it.
func grantsTo(t *testing.T, ms []deploy.Manifest, c component) map[deploy.APICall]string {
	t.Helper()
	roles := map[string][]rbacv1.PolicyRule{}
	crs, err := deploy.OfKind[rbacv1.ClusterRole](ms, "ClusterRole")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range crs {
		roles["ClusterRole/"+r.Name] = r.Rules
	}
	rs, err := deploy.OfKind[rbacv1.Role](ms, "Role")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		roles["Role/"+r.Namespace+"/"+r.Name] = r.Rules
	}
	var bound []string
	crbs, err := deploy.OfKind[rbacv1.ClusterRoleBinding](ms, "ClusterRoleBinding")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range crbs {
		if hasSubject(b.Subjects, c.serviceAccount) {
			bound = append(bound, "ClusterRole/"+b.RoleRef.Name)
		}
	}
	rbs, err := deploy.OfKind[rbacv1.RoleBinding](ms, "RoleBinding")
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range rbs {
		if hasSubject(b.Subjects, c.serviceAccount) {
			bound = append(bound, fmt.Sprintf("%s/%s/%s", b.RoleRef.Kind, b.Namespace, b.RoleRef.Name))
		}
	}
	out := map[deploy.APICall]string{}
	for _, name := range bound {
		if c.skipRoles[name] {
			continue
		}
		rules, ok := roles[name]
		if !ok {
			t.Fatalf("%s bound to %s is not in the manifests", name, c.serviceAccount)
		}
		for _, r := range rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out[deploy.APICall{Group: g, Resource: res, Verb: v}] = name
					}
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("no rules bound to %s", c.serviceAccount)
	}
	return out
}

func hasSubject(subjects []rbacv1.Subject, sa string) bool {
	for _, s := range subjects {
		if s.Kind == "ServiceAccount" && s.Name == sa {
			return true
		}
	}
	return false
}

func writeGo(t *testing.T, dir, src string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
}

// kubectlReaderTemplate is the chart's optional ClusterRole for the kubectl
// plugin; its rules block is literal YAML.
const kubectlReaderTemplate = "helm/vshare/templates/kubectl-reader.yaml"

// TestKubectlReaderGrantsExactlyThePluginsCalls: the read-only ClusterRole
// the chart offers for `kubectl vshare` grants every call the plugin's
// source makes, and nothing else.
func TestKubectlReaderGrantsExactlyThePluginsCalls(t *testing.T) {
	data, err := os.ReadFile(kubectlReaderTemplate)
	if err != nil {
		t.Fatal(err)
	}
	_, block, ok := strings.Cut(string(data), "\nrules:\n")
	if !ok {
		t.Fatalf("%s has no rules block", kubectlReaderTemplate)
	}
	block, _, _ = strings.Cut(block, "{{")
	var rules []rbacv1.PolicyRule
	if err := yaml.UnmarshalStrict([]byte(block), &rules); err != nil {
		t.Fatalf("%s rules: %v", kubectlReaderTemplate, err)
	}
	granted := map[deploy.APICall]bool{}
	for _, r := range rules {
		if len(r.ResourceNames) > 0 || len(r.NonResourceURLs) > 0 {
			t.Errorf("rule %+v: the plugin reads whole resources", r)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				for _, v := range r.Verbs {
					granted[deploy.APICall{Group: g, Resource: res, Verb: v}] = true
				}
			}
		}
	}
	calls, err := deploy.APICallSites(moduleDirs(t, "./cmd/kubectl-vshare")...)
	if err != nil {
		t.Fatal(err)
	}
	// Package config is linked for its parser; its ConfigMap watch is the
	// scheduler's and agent's, never started by the plugin, which reads a
	// device configuration from --device-config.
	notCalled := map[deploy.APICall]bool{{Resource: "configmaps", Verb: "list"}: true, {Resource: "configmaps", Verb: "watch"}: true}
	for call, sites := range calls {
		switch {
		case notCalled[call] && granted[call]:
			t.Errorf("%s is granted although the plugin never makes it", call)
		case notCalled[call]:
		case !granted[call]:
			t.Errorf("%s (%s) is not granted by %s", call, strings.Join(sites, ", "), kubectlReaderTemplate)
		}
	}
	for g := range granted {
		if _, ok := calls[g]; !ok {
			t.Errorf("%s is granted but the plugin's code never makes it", g)
		}
	}
}

// An informer of a factory the code is handed stands for that factory's
// list and watch of the resource; another group of the factory, or a
// resource accessor with arguments, is refused.
func TestAPICallScannerReadsHandedInformers(t *testing.T) {
	dir := t.TempDir()
	writeGo(t, dir, "package p\nfunc f() {\n\tpods := factory.Core().V1().Pods()\n\t_ = pods.Lister()\n}\n")
	if got, want := scannedCalls(t, dir), "list pods; watch pods"; got != want {
		t.Errorf("calls = %s, want %s", got, want)
	}
	for _, src := range []string{`factory.Apps().V1().Deployments()`, `factory.Core().V1().Pods("ns")`} {
		dir := t.TempDir()
		writeGo(t, dir, "package p\nfunc f() {\n\t_ = "+src+"\n}\n")
		if _, err := deploy.APICallSites(dir); err == nil {
			t.Errorf("no error for %s", src)
		}
	}
}

// scannedCalls is the scanner's calls in dir, sorted and joined by "; ".
func scannedCalls(t *testing.T, dir string) string {
	t.Helper()
	calls, err := deploy.APICallSites(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for c := range calls {
		got = append(got, c.String())
	}
	sort.Strings(got)
	return strings.Join(got, "; ")
}
