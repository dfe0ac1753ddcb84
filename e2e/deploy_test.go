//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	v1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deploy/schedconf"
	"github.com/vgpushare/vshare/deviceshare/pluginargs"
	"github.com/vgpushare/vshare/e2e/framework"
	"github.com/vgpushare/vshare/protocol/nodelock"
)

// chartDir and manifestsDir are relative to this package's directory.
const (
	chartDir     = "../deploy/helm/vshare"
	manifestsDir = "../deploy/manifests"
)

// deployVariant is one rendering of the chart and what it must produce.
type deployVariant struct {
	name string
	// set are helm --set arguments. The release namespace is created per
	// variant (deploy-<name>); "NS" in a value stands for it.
	set []string
	// check inspects the dry-run results; the scheduler conf and agent
	// command line have already been parsed by the components' parsers.
	check func(t *testing.T, r rendered)
}

// rendered is what one variant produced, as the API server returned it
// from the dry run.
type rendered struct {
	namespace string
	objects   []*unstructured.Unstructured
	// args, devices, daemonSet and deployment are nil when the chart
	// rendered no such object.
	args       *pluginargs.Args
	devices    *config.Config
	daemonSet  *appsv1.DaemonSet
	deployment *appsv1.Deployment
	// mps is the MPS control daemon's DaemonSet, rendered for nodes in
	// the mps operating mode.
	mps *appsv1.DaemonSet
}

func (r rendered) kinds() map[string]int {
	out := map[string]int{}
	for _, o := range r.objects {
		out[o.GetKind()]++
	}
	return out
}

func (r rendered) has(kind, namespace, name string) bool {
	for _, o := range r.objects {
		if o.GetKind() == kind && o.GetNamespace() == namespace && o.GetName() == name {
			return true
		}
	}
	return false
}

func deployVariants() []deployVariant {
	return []deployVariant{
		{
			name: "defaults",
			check: func(t *testing.T, r rendered) {
				if diff := cmp.Diff(map[string]int{
					"ServiceAccount": 3, "ClusterRole": 4, "ClusterRoleBinding": 4, "Role": 4, "RoleBinding": 4,
					"ConfigMap": 2, "Deployment": 2, "DaemonSet": 1, "Service": 3, "Secret": 1,
					"MutatingWebhookConfiguration": 1, "ValidatingWebhookConfiguration": 1,
				}, r.kinds()); diff != "" {
					t.Errorf("object kinds (-want +got):\n%s", diff)
				}
				want := pluginargs.Args{VGPUEnable: true, SchedulePolicy: "binpack", ScheduleWeight: 10, NodeLockExpiry: nodelock.DefaultTTL,
					ConfigMapName: config.DefaultConfigMapName, ConfigMapNamespace: config.DefaultConfigMapNamespace}
				if diff := cmp.Diff(want, *r.args); diff != "" {
					t.Errorf("deviceshare arguments (-want +got):\n%s", diff)
				}
				if diff := cmp.Diff(config.Default(), r.devices); diff != "" {
					t.Errorf("the default values' device config differs from the built-in defaults (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "service-monitors",
			set:  []string{"metrics.serviceMonitor.enabled=true", "metrics.serviceMonitor.labels.release=prometheus"},
			check: func(t *testing.T, r rendered) {
				if n := r.kinds()["ServiceMonitor"]; n != 2 {
					t.Errorf("ServiceMonitors = %d, want 2 (scheduler and node agent)", n)
				}
			},
		},
		{
			// GPU share and HAMi Ascend, node lock, spread, two replicas,
			// an edited device config, no agent metrics.
			name: "gpushare-ascend",
			set: []string{
				"deviceshare.VGPUEnable=false", "deviceshare.GPUSharingEnable=true",
				"deviceshare.AscendHAMiVNPUEnable=true", "deviceshare.AscendMindClusterVNPUEnable=true",
				"deviceshare.NodeLockEnable=true",
				"deviceshare.SchedulePolicy=spread", "deviceshare.ScheduleWeight=100",
				"deviceConfig.config.nvidia.deviceSplitCount=4", "deviceConfig.config.vnpus.hamiVnpuCore=true",
				"scheduler.replicas=2", "devicePlugin.metricsPort=0", "devicePlugin.runtimeClassName=nvidia",
			},
			check: func(t *testing.T, r rendered) {
				a := r.args
				if !a.GPUSharingEnable || a.VGPUEnable || !a.AscendHAMiVNPUEnable || !a.AscendMindClusterVNPUEnable ||
					!a.NodeLockEnable || a.SchedulePolicy != "spread" || a.ScheduleWeight != 100 {
					t.Errorf("deviceshare arguments = %+v, want GPU share, both Ascend backends, node lock, spread, weight 100", *a)
				}
				if !r.has("Role", "kube-system", "volcano-scheduler-mindcluster-deviceinfo") {
					t.Error("no Role for MindCluster's device-info ConfigMaps in kube-system")
				}
				if got := r.devices.NVIDIA.DeviceSplitCount; got != 4 {
					t.Errorf("nvidia.deviceSplitCount = %d, want 4", got)
				}
				if !r.devices.VNPUs.HAMiVNPUCore {
					t.Error("vnpus.hamiVnpuCore = false, want true")
				}
				if got := *r.deployment.Spec.Replicas; got != 2 {
					t.Errorf("scheduler replicas = %d, want 2", got)
				}
				if n := r.kinds()["Service"]; n != 2 || !r.has("Service", "deploy-gpushare-ascend", "vshare-webhook") {
					t.Errorf("Services = %d, want only the scheduler's and the webhook's with the agent's exporter off", n)
				}
			},
		},
		{
			// Another ConfigMap name and namespace, other host paths, other
			// object names, agent flags set: every reference must follow.
			name: "renamed",
			set: []string{
				"scheduler.name=vshare-scheduler", "devicePlugin.name=vshare-agent",
				"deviceConfig.name=gpu-config", "deviceConfig.namespace=NS",
				"devicePlugin.hostPaths.kubeletSocketDir=/var/lib/k8s/device-plugins",
				"devicePlugin.hostPaths.libvgpuDir=/opt/vshare/lib", "devicePlugin.hostPaths.cacheDir=/var/lib/vshare/cache",
				"devicePlugin.flags.memory-unit=factor", "devicePlugin.flags.handshake-interval=20s",
				"devicePlugin.env.DP_DISABLE_HEALTHCHECKS=xids",
				"image.registry=registry.example.com/gpu", "image.tag=v9.9.9",
				"kubectlReader.create=true", "kubectlReader.name=gpu-readers",
			},
			check: func(t *testing.T, r rendered) {
				if r.args.ConfigMapName != "gpu-config" || r.args.ConfigMapNamespace != r.namespace {
					t.Errorf("plugin reads ConfigMap %s/%s, want %s/gpu-config", r.args.ConfigMapNamespace, r.args.ConfigMapName, r.namespace)
				}
				if got := r.deployment.Name; got != "vshare-scheduler" {
					t.Errorf("Deployment %q, want vshare-scheduler", got)
				}
				if got := r.deployment.Spec.Template.Spec.Containers[0].Image; got != "registry.example.com/gpu/vc-scheduler:v9.9.9" {
					t.Errorf("scheduler image %q", got)
				}
				if !r.has("ClusterRole", "", "gpu-readers") {
					t.Error("no ClusterRole gpu-readers for kubectl vshare with kubectlReader.create")
				}
				if !r.has("ConfigMap", r.namespace, "gpu-config") || !r.has("Role", r.namespace, "vshare-scheduler-device-config") {
					t.Errorf("no ConfigMap %s/gpu-config or no Role to read it rendered", r.namespace)
				}
			},
		},
		{
			// A MIG node: the agent creates MIG instances, which needs a
			// privileged container; the defaults' restrictions that a
			// privileged container cannot have are dropped.
			name: "mig",
			set: []string{"deviceConfig.config.nodeconfig[0].name=gpu-1", "deviceConfig.config.nodeconfig[0].operatingmode=mig",
				"devicePlugin.securityContext.privileged=true"},
			check: func(t *testing.T, r rendered) {
				sc := r.daemonSet.Spec.Template.Spec.Containers[0].SecurityContext
				if sc == nil || sc.Privileged == nil || !*sc.Privileged || sc.AllowPrivilegeEscalation != nil || sc.Capabilities != nil {
					t.Errorf("agent securityContext = %+v, want privileged without allowPrivilegeEscalation or capabilities", sc)
				}
				if got := r.devices.NodeConfigs; len(got) != 1 || got[0].OperatingMode != "mig" {
					t.Errorf("nodeconfig = %+v, want gpu-1 in mig mode", got)
				}
				if r.mps != nil {
					t.Error("MPS control daemon rendered without a node in the mps operating mode")
				}
			},
		},
		{
			// An MPS node: the chart runs the MPS control daemon on it and
			// nowhere else, and the agent mounts the daemon's directories.
			name: "mps",
			set: []string{"deviceConfig.config.nodeconfig[0].name=gpu-1", "deviceConfig.config.nodeconfig[0].operatingmode=mps",
				"deviceConfig.config.nodeconfig[1].name=gpu-2", "mps.root=/run/vshare-mps"},
			check: func(t *testing.T, r rendered) {
				if r.mps == nil {
					t.Fatal("no MPS control daemon DaemonSet for a node in the mps operating mode")
				}
				terms := r.mps.Spec.Template.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
				if len(terms) != 1 || len(terms[0].MatchExpressions) != 1 || !slices.Equal(terms[0].MatchExpressions[0].Values, []string{"gpu-1"}) {
					t.Errorf("MPS daemon node affinity %+v, want kubernetes.io/hostname in [gpu-1]", terms)
				}
				c := r.mps.Spec.Template.Spec.Containers[0]
				if !strings.Contains(strings.Join(c.Command, " "), "nvidia-smi -c EXCLUSIVE_PROCESS && exec nvidia-cuda-mps-control -f") {
					t.Errorf("MPS daemon command %q, want exclusive-process mode and the daemon in the foreground", c.Command)
				}
				env := map[string]string{}
				for _, e := range c.Env {
					env[e.Name] = e.Value
				}
				if env["CUDA_MPS_PIPE_DIRECTORY"] != "/mps/pipe" || env["CUDA_MPS_LOG_DIRECTORY"] != "/mps/log" {
					t.Errorf("MPS daemon env %v, want its pipe and log directories under /mps", env)
				}
				var hostRoot string
				for _, v := range r.mps.Spec.Template.Spec.Volumes {
					if v.Name == "mps-root" && v.HostPath != nil {
						hostRoot = v.HostPath.Path
					}
				}
				if hostRoot != "/run/vshare-mps" {
					t.Errorf("MPS daemon root on the host %q, want mps.root /run/vshare-mps", hostRoot)
				}
				if !slices.Contains(r.daemonSet.Spec.Template.Spec.Containers[0].Args, "--mps-root=/run/vshare-mps") {
					t.Errorf("agent args %q, want --mps-root=/run/vshare-mps", r.daemonSet.Spec.Template.Spec.Containers[0].Args)
				}
			},
		},
		{
			// Under Volcano's own scheduler, which signs nothing.
			name: "agent-only",
			set:  []string{"scheduler.enabled=false", "deviceConfig.create=false", "allocationKey.secretName="},
			check: func(t *testing.T, r rendered) {
				if r.deployment != nil || r.args != nil {
					t.Error("scheduler rendered with scheduler.enabled=false")
				}
				if r.daemonSet == nil {
					t.Error("no node agent DaemonSet")
				}
				if n := r.kinds()["ConfigMap"]; n != 0 {
					t.Errorf("ConfigMaps = %d, want none with deviceConfig.create=false", n)
				}
				if n := r.kinds()["Secret"]; n != 0 {
					t.Errorf("Secrets = %d, want no allocation key without signing", n)
				}
			},
		},
	}
}

// TestDeployChartDryRun renders the chart with helm for the default values
// and several variants, creates every object with a server-side dry run
// (strict field validation) against the harness's kube-apiserver, and reads
// the rendered scheduler configuration, device ConfigMap and node agent
// command line with the components' own parsers.
func TestDeployChartDryRun(t *testing.T) {
	ctx := setup(t, "deploy-chart", 10*time.Minute)
	helm := helmFor(t, ctx)
	if out, err := helm.Run(ctx, "lint", "--strict", chartDir); err != nil {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	dry := dryRunner(t, ctx)
	for _, v := range deployVariants() {
		t.Run(v.name, func(t *testing.T) {
			ns := "deploy-" + v.name
			if err := cluster.CreateNamespace(ctx, ns); err != nil {
				t.Fatal(err)
			}
			var extra []string
			for _, s := range v.set {
				extra = append(extra, "--set", strings.ReplaceAll(s, "NS", ns))
			}
			out, err := helm.Template(ctx, chartDir, "vshare", ns, extra...)
			if err != nil {
				t.Fatal(err)
			}
			r := dryRunAll(t, ctx, dry, out)
			r.namespace = ns
			v.check(t, r)
		})
	}
}

// TestDeployChartRejectsBadValues: values that would produce a scheduler
// or agent that cannot work fail at rendering (the templates' checks and
// values.schema.json), with the value named.
func TestDeployChartRejectsBadValues(t *testing.T) {
	ctx := setup(t, "deploy-bad-values", 5*time.Minute)
	helm := helmFor(t, ctx)
	for _, tc := range []struct{ name, values, want string }{
		{"replicas without leader election", "scheduler: {replicas: 2, leaderElect: false}", "scheduler.leaderElect"},
		{"no such tier", "scheduler: {deviceshareTier: 5}", "scheduler.deviceshareTier=5"},
		{"deviceshare in tiers", "scheduler:\n  tiers:\n  - plugins: [{name: gang}]\n  - plugins: [{name: deviceshare}]\n", "leave deviceshare out"},
		{"signing without our scheduler", "scheduler: {enabled: false}", "allocationKey.secretName is set but scheduler.enabled is false"},
		// values.schema.json
		{"misspelt argument", "deviceshare: {VGPUEnabled: true}", "VGPUEnabled"},
		{"argument out of range", "deviceshare: {ScheduleWeight: 101}", "ScheduleWeight"},
		{"exclusive rule with an unquoted boolean", "deviceshare: {GPUExclusiveRules: [{gpu-exclusive: true}]}", "GPUExclusiveRules/0/gpu-exclusive"},
		{"empty exclusive rule", "deviceshare: {GPUExclusiveRules: [{}]}", "GPUExclusiveRules/0"},
		{"unknown agent flag", "devicePlugin: {flags: {no-such-flag: 1}}", "no-such-flag"},
		{"relative host path", "devicePlugin: {hostPaths: {cacheDir: vgpu}}", "cacheDir"},
		{"relative MPS root", "mps: {root: run/mps}", "root"},
		{"MPS shm size in Kubernetes units", "mps: {shmSize: 1Gi}", "shmSize"},
		{"MIG node without privilege", "deviceConfig:\n  config:\n    nodeconfig:\n    - {name: gpu-1, operatingmode: mig}\n",
			"devicePlugin.securityContext.privileged=true"},
	} {
		file := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(file, []byte(tc.values), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := helm.Template(ctx, chartDir, "vshare", "volcano-system", "-f", file)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want one naming %q", tc.name, err, tc.want)
		}
	}
}

// TestDeployPlainManifests: the plain manifests are the chart's default
// rendering (`make deploy-manifests`), and every object in them passes a
// server-side dry run.
func TestDeployPlainManifests(t *testing.T) {
	ctx := setup(t, "deploy-plain", 5*time.Minute)
	helm := helmFor(t, ctx)
	if err := cluster.CreateNamespace(ctx, "volcano-system"); err != nil {
		t.Fatal(err)
	}
	dry := dryRunner(t, ctx)
	for _, tc := range []struct {
		file string
		set  []string
	}{
		{"vshare.yaml", []string{"--set", "allocationKey.create=false"}}, // see PLAIN_SET in the Makefile
		{"servicemonitors.yaml", []string{"--set", "metrics.serviceMonitor.enabled=true", "--show-only", "templates/servicemonitors.yaml"}},
	} {
		t.Run(tc.file, func(t *testing.T) {
			plain, err := os.ReadFile(filepath.Join(manifestsDir, tc.file))
			if err != nil {
				t.Fatal(err)
			}
			want, err := helm.Template(ctx, chartDir, "vshare", "volcano-system", tc.set...)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(stripHeader(plain))); diff != "" {
				t.Errorf("%s is not the chart's rendering; run `make deploy-manifests` (-chart +file):\n%s", tc.file, diff)
			}
			dryRunAll(t, ctx, dry, plain)
		})
	}
}

// TestDeployChecksCanFail: the dry run and the agent check reject what
// they exist to reject, so the passing variants above mean something.
func TestDeployChecksCanFail(t *testing.T) {
	ctx := setup(t, "deploy-negative", 5*time.Minute)
	helm := helmFor(t, ctx)
	dry := dryRunner(t, ctx)
	render := func(t *testing.T, set ...string) []*unstructured.Unstructured {
		t.Helper()
		var extra []string
		for _, s := range set {
			extra = append(extra, "--set", s)
		}
		out, err := helm.Template(ctx, chartDir, "vshare", "deploy-negative", extra...)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := framework.DecodeManifests(out)
		if err != nil {
			t.Fatal(err)
		}
		return objs
	}
	daemonSet := func(t *testing.T, objs []*unstructured.Unstructured) *appsv1.DaemonSet {
		t.Helper()
		for _, o := range objs {
			if o.GetKind() == "DaemonSet" {
				ds := new(appsv1.DaemonSet)
				fromUnstructured(t, o, ds)
				return ds
			}
		}
		t.Fatal("no DaemonSet rendered")
		return nil
	}

	t.Run("misspelt field", func(t *testing.T) {
		for _, o := range render(t, "devicePlugin.securityContext.privilegd=true") {
			if o.GetKind() != "DaemonSet" {
				continue
			}
			if _, err := dry.Create(ctx, o); err == nil || !strings.Contains(err.Error(), "privilegd") {
				t.Errorf("dry-run create of a DaemonSet with a misspelt field: err = %v, want one naming it", err)
			}
		}
	})
	t.Run("invalid object", func(t *testing.T) {
		for _, o := range render(t, "devicePlugin.name=Bad_Name") {
			if o.GetKind() != "DaemonSet" {
				continue
			}
			if _, err := dry.Create(ctx, o); err == nil || !strings.Contains(err.Error(), "metadata.name: Invalid value") {
				t.Errorf("dry-run create of a DaemonSet named Bad_Name: err = %v, want metadata.name: Invalid value", err)
			}
		}
	})
	t.Run("agent flag the agent refuses", func(t *testing.T) {
		ds := daemonSet(t, render(t, "devicePlugin.flags.handshake-interval=2m"))
		if err := agentCommandLineError(ctx, ds); err == nil || !strings.Contains(err.Error(), "--handshake-interval") {
			t.Errorf("agent check of --handshake-interval=2m: err = %v, want one naming the flag", err)
		}
	})
	t.Run("unknown agent flag", func(t *testing.T) {
		ds := daemonSet(t, render(t, "devicePlugin.extraArgs={--no-such-flag=1}"))
		if err := agentCommandLineError(ctx, ds); err == nil || !strings.Contains(err.Error(), "no-such-flag") {
			t.Errorf("agent check of --no-such-flag: err = %v, want one naming the flag", err)
		}
	})
	t.Run("cache dir not mounted at its path", func(t *testing.T) {
		ds := daemonSet(t, render(t))
		ds.Spec.Template.Spec.Containers[0].VolumeMounts[2].MountPath = "/elsewhere"
		if err := agentCommandLineError(ctx, ds); err == nil || !strings.Contains(err.Error(), "--cache-dir") {
			t.Errorf("agent check with the cache dir mounted elsewhere: err = %v, want one naming --cache-dir", err)
		}
	})
}

// stripHeader drops the comment lines `make deploy-manifests` puts before
// helm's output.
func stripHeader(b []byte) []byte {
	for bytes.HasPrefix(b, []byte("#")) {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			return nil
		}
		b = b[i+1:]
	}
	return b
}

func helmFor(t *testing.T, ctx context.Context) framework.Helm {
	t.Helper()
	path, err := framework.EnsureHelm(ctx, testWriter{t})
	if err != nil {
		t.Fatal(err)
	}
	return framework.Helm{Path: path, Home: t.TempDir()}
}

// dryRunner returns a DryRunner that knows the ServiceMonitor kind.
func dryRunner(t *testing.T, ctx context.Context) *framework.DryRunner {
	t.Helper()
	if err := cluster.InstallServiceMonitorCRD(ctx); err != nil {
		t.Fatal(err)
	}
	dry, err := cluster.NewDryRunner()
	if err != nil {
		t.Fatal(err)
	}
	dry.Reset()
	return dry
}

// dryRunAll decodes manifests, dry-runs every object, and parses the
// scheduler configuration, device ConfigMap and node agent command line
// found among the API server's answers.
func dryRunAll(t *testing.T, ctx context.Context, dry *framework.DryRunner, manifests []byte) rendered {
	t.Helper()
	objs, err := framework.DecodeManifests(manifests)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("nothing rendered")
	}
	var r rendered
	for _, o := range objs {
		got, err := dry.Create(ctx, o)
		if err != nil {
			t.Error(err)
			continue
		}
		r.objects = append(r.objects, got)
		switch got.GetKind() {
		case "ConfigMap":
			readConfigMap(t, got, &r)
		case "Deployment":
			if got.GetLabels()["app.kubernetes.io/component"] == "webhook" {
				continue
			}
			r.deployment = new(appsv1.Deployment)
			fromUnstructured(t, got, r.deployment)
		case "DaemonSet":
			if got.GetLabels()["app.kubernetes.io/component"] == "mps-control-daemon" {
				r.mps = new(appsv1.DaemonSet)
				fromUnstructured(t, got, r.mps)
				continue
			}
			r.daemonSet = new(appsv1.DaemonSet)
			fromUnstructured(t, got, r.daemonSet)
			checkAgentCommandLine(t, ctx, r.daemonSet)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return r
}

func readConfigMap(t *testing.T, u *unstructured.Unstructured, r *rendered) {
	t.Helper()
	cm := new(v1.ConfigMap)
	fromUnstructured(t, u, cm)
	if conf, ok := cm.Data["volcano-scheduler.conf"]; ok {
		args, err := schedconf.SchedulerArgs(conf)
		if err != nil {
			t.Errorf("ConfigMap %s/%s: %v", cm.Namespace, cm.Name, err)
			return
		}
		r.args = &args
	}
	if _, ok := cm.Data[config.ConfigKey]; ok {
		cfg, err := config.FromConfigMap(cm)
		if err != nil {
			t.Errorf("ConfigMap %s/%s: %v", cm.Namespace, cm.Name, err)
			return
		}
		r.devices = cfg
	}
}

// checkAgentCommandLine reports agentCommandLineError.
func checkAgentCommandLine(t *testing.T, ctx context.Context, ds *appsv1.DaemonSet) {
	t.Helper()
	if err := agentCommandLineError(ctx, ds); err != nil {
		t.Errorf("DaemonSet %s: %v", ds.Name, err)
	}
}

// agentCommandLineError runs the agent binary under test with the
// container's args and environment: flag parsing and validation come first
// in it, so an agent that gets as far as loading NVML (absent here) accepted
// its command line. It also checks that every path the agent hands to the
// kubelet is under a hostPath mounted at its own path. (The agent cannot be
// linked into this test: see package deploy/schedconf.)
func agentCommandLineError(ctx context.Context, ds *appsv1.DaemonSet) error {
	spec := ds.Spec.Template.Spec
	c := spec.Containers[0]
	env := []string{"PATH=" + os.Getenv("PATH")}
	for _, e := range c.Env {
		v := e.Value
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName" {
			v = "gpu-node-a"
		}
		env = append(env, e.Name+"="+v)
	}
	runCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(runCtx, binaries.Path(framework.BinDevicePlugin), c.Args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return fmt.Errorf("the agent exited 0 without NVML:\n%s", out)
	case errors.As(err, &exit) && strings.Contains(string(out), "initialise NVML"):
		// Past validation.
	case runCtx.Err() != nil:
		// Still running after validation: a machine with NVML.
	default:
		return fmt.Errorf("the agent rejects its command line %q: %v\n%s", c.Args, err, out)
	}

	flags := map[string]string{}
	for _, a := range c.Args {
		if k, v, ok := strings.Cut(strings.TrimPrefix(a, "--"), "="); ok {
			flags[k] = v
		}
	}
	hostPaths := map[string]string{}
	for _, v := range spec.Volumes {
		if v.HostPath != nil {
			hostPaths[v.Name] = v.HostPath.Path
		}
	}
	mounted := func(path string) bool {
		for _, m := range c.VolumeMounts {
			if hp, ok := hostPaths[m.Name]; ok && m.MountPath == hp && (path == hp || strings.HasPrefix(path, hp+"/")) {
				return true
			}
		}
		return false
	}
	for _, flag := range []string{"kubelet-socket-dir", "cache-dir", "libvgpu-host-path"} {
		if path, ok := flags[flag]; !ok || !mounted(path) {
			return fmt.Errorf("--%s=%q is not under a hostPath mounted at its own path", flag, path)
		}
	}
	return nil
}

func fromUnstructured(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		t.Fatalf("%s: %v", framework.ObjectRef(u), err)
	}
}

// testWriter sends helm's installation progress to the test log.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// TestDeployRBACGrantsWhatTheCodeCalls creates the chart's ServiceAccounts
// and RBAC for real (under names of their own) and asks the API server, as
// each ServiceAccount, for the calls the scheduler plugin and the node agent
// make: they must be allowed, and a few they do not make must not. The
// device ConfigMap is listed for real with the informer's field selector,
// which is how resourceNames can restrict a list and a watch.
func TestDeployRBACGrantsWhatTheCodeCalls(t *testing.T) {
	const ns = "deploy-rbac"
	ctx := setup(t, ns, 5*time.Minute)
	helm := helmFor(t, ctx)
	out, err := helm.Template(ctx, chartDir, "vshare", ns,
		"--set", "scheduler.name=rbac-scheduler", "--set", "devicePlugin.name=rbac-agent",
		"--set", "deviceConfig.namespace="+ns, "--set", "deviceConfig.name=rbac-device-config",
		"--set", "deviceshare.AscendMindClusterVNPUEnable=true")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := framework.DecodeManifests(out)
	if err != nil {
		t.Fatal(err)
	}
	createRBAC(t, ctx, objs, ns)

	scheduler := "system:serviceaccount:" + ns + ":rbac-scheduler"
	agent := "system:serviceaccount:" + ns + ":rbac-agent"
	type access struct {
		user                                         string
		verb, resource, subresource, namespace, name string
		allowed                                      bool
	}
	for _, a := range []access{
		// deviceshare: advertiser, binder, node lock, events, device ConfigMap, MindCluster device info.
		{scheduler, "patch", "nodes", "status", "", "gpu-node-0", true},
		{scheduler, "create", "pods", "binding", "default", "p", true},
		{scheduler, "get", "nodes", "", "", "gpu-node-0", true},
		{scheduler, "update", "nodes", "", "", "gpu-node-0", true},
		{scheduler, "create", "events", "", "kube-system", "", true},
		{scheduler, "patch", "events", "", "default", "e", true},
		{scheduler, "get", "pods", "", "default", "p", true},
		{scheduler, "watch", "pods", "", "default", "", true},
		{scheduler, "watch", "configmaps", "", ns, "rbac-device-config", true},
		{scheduler, "list", "configmaps", "", "kube-system", "", true},
		{scheduler, "watch", "configmaps", "", "kube-system", "", true},
		{scheduler, "list", "secrets", "", "kube-system", "", false},
		// node agent: its pods, its node, the device ConfigMap.
		{agent, "list", "pods", "", "", "", true},
		{agent, "watch", "pods", "", "", "", true},
		{agent, "patch", "pods", "", "default", "p", true},
		{agent, "patch", "nodes", "", "", "gpu-node-0", true},
		{agent, "update", "nodes", "", "", "gpu-node-0", true},
		{agent, "create", "events", "", "default", "", true},
		{agent, "patch", "events", "", "default", "e", false},
		{agent, "watch", "configmaps", "", ns, "rbac-device-config", true},
		{agent, "watch", "configmaps", "", ns, "", false},
		{agent, "list", "configmaps", "", "kube-system", "", false},
		{agent, "create", "pods", "binding", "default", "p", false},
		{agent, "patch", "nodes", "status", "", "gpu-node-0", false},
		{agent, "delete", "pods", "", "default", "p", false},
		{agent, "get", "secrets", "", ns, "", false},
	} {
		sar, err := cluster.Kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   a.user,
				Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: a.verb, Resource: a.resource, Subresource: a.subresource, Namespace: a.namespace, Name: a.name,
				},
			},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sar.Status.Allowed != a.allowed {
			t.Errorf("%s %s %s/%s %s/%s: allowed %t, want %t (%s)", a.user, a.verb, a.resource, a.subresource,
				a.namespace, a.name, sar.Status.Allowed, a.allowed, sar.Status.Reason)
		}
	}

	// The informers' list: field selector metadata.name=<name> passes the
	// resourceNames rule; a list of the whole namespace does not.
	for _, user := range []string{scheduler, agent} {
		cfg := rest.CopyConfig(cluster.Config)
		cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:serviceaccounts", "system:authenticated"}}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cms := client.CoreV1().ConfigMaps(ns)
		list, err := cms.List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=rbac-device-config"})
		if err != nil {
			t.Errorf("%s: list the device ConfigMap by name: %v", user, err)
		} else if len(list.Items) != 1 {
			t.Errorf("%s: list the device ConfigMap by name: %d items, want 1", user, len(list.Items))
		}
		if _, err := cms.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("%s: list every ConfigMap of %s: err = %v, want Forbidden", user, ns, err)
		}
	}
}
