//go:build e2e

package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

// HelmVersion is installed with `go install helm.sh/helm/v3/cmd/helm@HelmVersion`
// in its own module graph, like kwok: helm's dependencies (client-go v0.37,
// ...) would otherwise drag this module's k8s.io pins forward. It is the
// newest helm v3 the module proxy serves.
const HelmVersion = "v3.22.0"

// HelmKubeVersion is the Kubernetes version charts are rendered for: the
// kube-apiserver the harness runs. A helm built by `go install` carries no
// default Kubernetes version of its own (it falls back to v1.20).
const HelmKubeVersion = "v1.30.2"

// PrometheusOperatorVersion is the module whose ServiceMonitor CRD
// (example/prometheus-operator-crd/) the deploy tests install, downloaded
// with `go mod download` outside this module's graph.
const PrometheusOperatorVersion = "v0.76.0"

// helmBinary is the cached helm's file name; the version in the name makes
// a version bump install afresh.
func helmBinary() string { return "helm-" + HelmVersion }

// EnsureHelm returns the path of helm HelmVersion, installing it into the
// harness's cache (next to kwok) on first use. A file lock keeps concurrent
// runs from installing it twice.
func EnsureHelm(ctx context.Context, log io.Writer) (string, error) {
	root, err := ModuleRoot()
	if err != nil {
		return "", err
	}
	cache, err := CacheDir(root)
	if err != nil {
		return "", err
	}
	binDir := filepath.Join(cache, "bin")
	if err := os.MkdirAll(binDir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", binDir, err)
	}
	unlock, err := lockFile(filepath.Join(cache, "helm.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	path := filepath.Join(binDir, helmBinary())
	if _, err := os.Stat(path); err == nil {
		return path, nil
	}
	fmt.Fprintf(log, "e2e: installing helm %s in its own module graph (a minute or two, once per machine)\n", HelmVersion)
	start := time.Now()
	tmp, err := os.MkdirTemp("", "vshare-helm-")
	if err != nil {
		return "", fmt.Errorf("helm install directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "install", "helm.sh/helm/v3/cmd/helm@"+HelmVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=-buildvcs=false")
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go install helm@%s: %w", HelmVersion, err)
	}
	if err := os.Rename(filepath.Join(tmp, "helm"), path); err != nil {
		return "", fmt.Errorf("install helm: %w", err)
	}
	fmt.Fprintf(log, "e2e: helm %s installed in %s\n", HelmVersion, time.Since(start).Round(time.Second))
	return path, nil
}

// Helm runs one helm binary with its state (repositories, cache, plugins)
// in a private directory, so the user's helm configuration plays no part.
type Helm struct {
	// Path is the helm executable; Home its private state directory.
	Path, Home string
}

// Run runs helm with args and returns its standard output; a failure
// carries helm's standard error.
func (h Helm) Run(ctx context.Context, args ...string) ([]byte, error) {
	cmd := exec.CommandContext(ctx, h.Path, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(h.Home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(h.Home, "config"),
		"HELM_DATA_HOME="+filepath.Join(h.Home, "data"),
		"KUBECONFIG="+os.DevNull) // template and lint never need a cluster; install names its --kubeconfig
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes(), nil
}

// Template renders chart as release into namespace for HelmKubeVersion,
// with extra arguments such as --set k=v or -f values.yaml.
func (h Helm) Template(ctx context.Context, chart, release, namespace string, extra ...string) ([]byte, error) {
	args := append([]string{"template", release, chart, "--namespace", namespace, "--kube-version", HelmKubeVersion}, extra...)
	return h.Run(ctx, args...)
}

// Install runs `helm install` of chart as release into namespace of the
// cluster kubeconfig names, with extra arguments such as --set k=v, and
// --wait: helm returns once the release's Deployments and DaemonSets are
// ready, or fails after timeout.
func (h Helm) Install(ctx context.Context, kubeconfig, chart, release, namespace string, timeout time.Duration, extra ...string) ([]byte, error) {
	args := append([]string{"install", release, chart, "--namespace", namespace, "--kubeconfig", kubeconfig,
		"--wait", "--timeout", timeout.String()}, extra...)
	return h.Run(ctx, args...)
}

// DecodeManifests splits a multi-document YAML stream into objects,
// skipping empty documents (helm emits one per template that renders
// nothing).
func DecodeManifests(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for i := 0; ; i++ {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("decode manifest document %d: %w", i, err)
		}
		if len(raw) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: raw}
		if u.GetKind() == "" || u.GetAPIVersion() == "" {
			return nil, fmt.Errorf("manifest document %d has no kind or apiVersion", i)
		}
		out = append(out, u)
	}
}

// ObjectRef names an object in messages: Kind namespace/name.
func ObjectRef(u *unstructured.Unstructured) string {
	if ns := u.GetNamespace(); ns != "" {
		return u.GetKind() + " " + ns + "/" + u.GetName()
	}
	return u.GetKind() + " " + u.GetName()
}

// DryRunner sends objects to the API server with a server-side dry run:
// the API server decodes (strict field validation: an unknown or misspelt
// field is an error), defaults, validates and runs admission, and stores
// nothing.
type DryRunner struct {
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
}

// NewDryRunner returns a DryRunner for the cluster. Call Reset after
// installing CRDs so their kinds resolve.
func (c *Cluster) NewDryRunner() (*DryRunner, error) {
	dyn, err := dynamic.NewForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("dynamic client: %w", err)
	}
	disc, err := discovery.NewDiscoveryClientForConfig(c.Config)
	if err != nil {
		return nil, fmt.Errorf("discovery client: %w", err)
	}
	return &DryRunner{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))}, nil
}

// Reset forgets the discovered API resources.
func (d *DryRunner) Reset() { d.mapper.Reset() }

// Create creates u with dryRun=All and strict field validation. An object
// that already exists (a ConfigMap another test created, say) is instead
// checked with a dry-run server-side apply, which validates the same way.
// It returns the object as the API server would have stored it.
func (d *DryRunner) Create(ctx context.Context, u *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	gvk := u.GroupVersionKind()
	m, err := d.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s: no API resource for %s: %w", ObjectRef(u), gvk, err)
	}
	var ri dynamic.ResourceInterface = d.dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			return nil, fmt.Errorf("%s: namespaced kind without metadata.namespace", ObjectRef(u))
		}
		ri = d.dyn.Resource(m.Resource).Namespace(u.GetNamespace())
	} else if u.GetNamespace() != "" {
		return nil, fmt.Errorf("%s: cluster-scoped kind with metadata.namespace", ObjectRef(u))
	}
	got, err := ri.Create(ctx, u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: metav1.FieldValidationStrict})
	if apierrors.IsAlreadyExists(err) {
		body, merr := json.Marshal(u.Object)
		if merr != nil {
			return nil, fmt.Errorf("%s: encode: %w", ObjectRef(u), merr)
		}
		force := true
		got, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, body, metav1.PatchOptions{
			DryRun: []string{metav1.DryRunAll}, FieldManager: "vshare-e2e", Force: &force,
			FieldValidation: metav1.FieldValidationStrict,
		})
	}
	if err != nil {
		return nil, fmt.Errorf("dry-run create %s: %w", ObjectRef(u), err)
	}
	return got, nil
}

// InstallServiceMonitorCRD creates the Prometheus operator's ServiceMonitor
// CRD (monitoring.coreos.com/v1) from the prometheus-operator module at
// PrometheusOperatorVersion, downloaded outside this module's graph, and
// waits until it is Established.
func (c *Cluster) InstallServiceMonitorCRD(ctx context.Context) error {
	tmp, err := os.MkdirTemp("", "vshare-promop-")
	if err != nil {
		return fmt.Errorf("download directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	mod := "github.com/prometheus-operator/prometheus-operator@" + PrometheusOperatorVersion
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go mod download %s: %w", mod, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Dir == "" {
		return fmt.Errorf("go mod download %s: no module directory (%s; err %v)", mod, info.Error, err)
	}
	data, err := os.ReadFile(filepath.Join(info.Dir, "example", "prometheus-operator-crd", "monitoring.coreos.com_servicemonitors.yaml"))
	if err != nil {
		return fmt.Errorf("read ServiceMonitor CRD: %w", err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(data, &crd); err != nil {
		return fmt.Errorf("decode ServiceMonitor CRD: %w", err)
	}
	client, err := apiextensions.NewForConfig(c.Config)
	if err != nil {
		return fmt.Errorf("apiextensions client: %w", err)
	}
	if _, err := client.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, &crd, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("create CRD %s: %w", crd.Name, err)
	}
	return c.Poll(ctx, time.Minute, "ServiceMonitor CRD Established", func(ctx context.Context) (bool, error) {
		got, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}
