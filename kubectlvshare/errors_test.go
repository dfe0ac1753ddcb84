package kubectlvshare

import (
	"context"
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
)

// TestErrorsNameTheObject: a read the API server refuses, an object that
// is not there, an unreachable server and command-line mistakes end with
// the documented exit code and a message naming the object and the problem.
func TestErrorsNameTheObject(t *testing.T) {
	forbid := func(verb, resource string) func(*fakeEnv) {
		return func(f *fakeEnv) {
			react := func(a clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: a.GetResource().Group, Resource: resource}, "",
					errors.New(`User "reader" cannot `+verb+` resource "`+resource+`"`))
			}
			f.kube.PrependReactor(verb, resource, react)
			f.volcano.PrependReactor(verb, resource, react)
		}
	}
	tests := []struct {
		name    string
		prepare func(*fakeEnv)
		args    []string
		code    int
		want    []string
	}{
		{name: "forbidden nodes", prepare: forbid("list", "nodes"), args: []string{"cards"}, code: ExitError,
			want: []string{"forbidden: cannot list nodes", `User "reader" cannot list resource "nodes"`, "docs/kubectl-vshare.md#rbac"}},
		{name: "forbidden pods in a namespace", prepare: forbid("list", "pods"), args: []string{"pods"}, code: ExitError,
			want: []string{"forbidden: cannot list pods in namespace team"}},
		{name: "forbidden podgroup", prepare: forbid("get", "podgroups"), args: []string{"why", "waiter"}, code: ExitError,
			want: []string{"forbidden: cannot get podgroup team/pg-waiter"}},
		{name: "forbidden events", prepare: forbid("list", "events"), args: []string{"why", "waiter"}, code: ExitError,
			want: []string{"forbidden: cannot list events in namespace team"}},
		{name: "pod not found", args: []string{"why", "nope"}, code: ExitError, want: []string{"pod team/nope not found"}},
		{name: "node not found", args: []string{"cards", "--node", "nope"}, code: ExitError, want: []string{"node nope not found"}},
		{name: "unknown command", args: []string{"frobnicate"}, code: ExitUsage, want: []string{`unknown command "frobnicate"`, "--help"}},
		{name: "no command", args: nil, code: ExitUsage, want: []string{"no command given"}},
		{name: "unknown flag", args: []string{"cards", "--bogus"}, code: ExitUsage, want: []string{"unknown flag: --bogus"}},
		{name: "bad output", args: []string{"cards", "-o", "xml"}, code: ExitUsage, want: []string{`--output="xml"`}},
		{name: "bad policy", args: []string{"fit", "--policy", "random"}, code: ExitUsage, want: []string{`--policy="random"`}},
		{name: "why without pod", args: []string{"why"}, code: ExitUsage, want: []string{"why takes one pod name"}},
		{name: "fit without cards", args: []string{"fit", "--number", "0"}, code: ExitUsage, want: []string{"--number=0"}},
		{name: "fit negative memory", args: []string{"fit", "--memory=-5"}, code: ExitUsage, want: []string{"--memory=-5", "want 0 or more MiB"}},
		{name: "fit negative cores", args: []string{"fit", "--memory", "100", "--cores=-1"}, code: ExitUsage, want: []string{"--cores=-1"}},
		{name: "fit invalid request", args: []string{"fit", "--cores", "150"}, code: ExitUsage,
			want: []string{"not a valid hamivgpu request", "volcano.sh/vgpu-cores"}},
		{name: "missing device config", args: []string{"cards", "--device-config", "/nonexistent.yaml"}, code: ExitUsage,
			want: []string{"--device-config", "/nonexistent.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeEnv(t)
			if tc.prepare != nil {
				tc.prepare(f)
			}
			code, out, errOut := f.run(tc.args...)
			if code != tc.code {
				t.Errorf("exit code %d, want %d; stdout:\n%s\nstderr:\n%s", code, tc.code, out, errOut)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("stderr %q does not say %q", errOut, w)
				}
			}
			if tc.code != ExitOK && out != "" {
				t.Errorf("stdout not empty on failure: %q", out)
			}
		})
	}
}

func TestConnectWithoutCluster(t *testing.T) {
	code := Run(context.Background(), []string{"cards", "--kubeconfig", t.TempDir() + "/missing"}, Env{Stdout: &strings.Builder{}, Stderr: &strings.Builder{}})
	if code != ExitError {
		t.Errorf("exit code %d, want %d", code, ExitError)
	}
	var b strings.Builder
	kubeconfig := t.TempDir() + "/kubeconfig"
	writeFile(t, kubeconfig, `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`)
	code = Run(context.Background(), []string{"cards", "--kubeconfig", kubeconfig, "--request-timeout", "5s"}, Env{Stdout: &b, Stderr: &b})
	if code != ExitError || !strings.Contains(b.String(), "no cluster: cannot list nodes: the API server cannot be reached") {
		t.Errorf("exit code %d, output %q; want %d and the unreachable server named", code, b.String(), ExitError)
	}
}
