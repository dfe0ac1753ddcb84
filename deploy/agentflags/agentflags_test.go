package agentflags_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deploy"
	"github.com/vgpushare/vshare/deploy/agentflags"
)

// TestPlainAgentCommandLine parses the plain manifests' node agent
// container args with the agent's own flag set and validation.
func TestPlainAgentCommandLine(t *testing.T) {
	ms, err := deploy.ReadManifests(filepath.Join("..", deploy.PlainManifests))
	if err != nil {
		t.Fatal(err)
	}
	dss, err := deploy.OfKind[appsv1.DaemonSet](ms, "DaemonSet")
	if err != nil {
		t.Fatal(err)
	}
	if len(dss) != 1 {
		t.Fatalf("want one DaemonSet, found %d", len(dss))
	}
	c := dss[0].Spec.Template.Spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "spec.nodeName":
			env[e.Name] = "gpu-node-a"
		}
	}
	opts, err := agentflags.Options(c.Args, env)
	if err != nil {
		t.Fatal(err)
	}
	if opts.NodeName != "gpu-node-a" {
		t.Errorf("node name %q, want it from NODE_NAME (spec.nodeName)", opts.NodeName)
	}
	if opts.ConfigMapName != config.DefaultConfigMapName || opts.ConfigMapNamespace != config.DefaultConfigMapNamespace {
		t.Errorf("agent reads %s/%s, want the scheduler's ConfigMap", opts.ConfigMapNamespace, opts.ConfigMapName)
	}
	if opts.MetricsAddress != ":9394" || opts.NVML != "real" {
		t.Errorf("metrics address %q, NVML %q; want :9394 and real", opts.MetricsAddress, opts.NVML)
	}
}

// TestOptionsRejects: a bad command line is an error naming the flag.
func TestOptionsRejects(t *testing.T) {
	env := map[string]string{"NODE_NAME": "n1"}
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"--no-such-flag"}, env, "no-such-flag"},
		{[]string{"--cache-dir=relative"}, env, "--cache-dir"},
		{[]string{"--handshake-interval=2m"}, env, "--handshake-interval"},
		{nil, map[string]string{}, "--node-name"},
		{nil, map[string]string{"NODE_NAME": "n1", "DP_DISABLE_HEALTHCHECKS": "bogus"}, "DP_DISABLE_HEALTHCHECKS"},
	} {
		_, err := agentflags.Options(tc.args, tc.env)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Options(%q, %v): err = %v, want one naming %s", tc.args, tc.env, err, tc.want)
		}
	}
}

// TestChartValuesListEveryAgentFlag: each agent flag is either a value in
// devicePlugin.flags or set by the template from another value.
func TestChartValuesListEveryAgentFlag(t *testing.T) {
	fromTemplate := map[string]string{
		"kubelet-socket-dir":  "devicePlugin.hostPaths.kubeletSocketDir",
		"libvgpu-host-path":   "devicePlugin.hostPaths.libvgpuDir",
		"cache-dir":           "devicePlugin.hostPaths.cacheDir",
		"mps-root":            "mps.root",
		"configmap-namespace": "deviceConfig.namespace",
		"configmap-name":      "deviceConfig.name",
		"metrics-address":     "devicePlugin.metricsPort",
		"node-name":           "NODE_NAME from spec.nodeName",
		"kubeconfig":          "in-cluster configuration",
		"config-file":         "the ConfigMap is watched instead",
		"allocation-key-file": "allocationKey.secretName",
		"scheduler-names":     "scheduler.schedulerNames",
	}
	flags, err := deploy.Values(filepath.Join("..", deploy.ChartValues), "devicePlugin", "flags")
	if err != nil {
		t.Fatal(err)
	}
	known := map[string]bool{}
	for _, name := range agentflags.Flags() {
		known[name] = true
		_, inValues := flags[name]
		_, templated := fromTemplate[name]
		if inValues == templated {
			t.Errorf("agent flag --%s: in devicePlugin.flags %t, set by the template %t; want exactly one", name, inValues, templated)
		}
	}
	for name := range flags {
		if !known[name] {
			t.Errorf("devicePlugin.flags.%s is not a flag of the agent", name)
		}
	}
	// values.schema.json closes devicePlugin.flags over the same names.
	data, err := os.ReadFile(filepath.Join("..", deploy.ChartSchema))
	if err != nil {
		t.Fatal(err)
	}
	var schema struct {
		Properties struct {
			DevicePlugin struct {
				Properties struct {
					Flags struct {
						AdditionalProperties *bool          `json:"additionalProperties"`
						Properties           map[string]any `json:"properties"`
					} `json:"flags"`
				} `json:"properties"`
			} `json:"devicePlugin"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	sf := schema.Properties.DevicePlugin.Properties.Flags
	if sf.AdditionalProperties == nil || *sf.AdditionalProperties {
		t.Error("values.schema.json: devicePlugin.flags must set additionalProperties: false")
	}
	for name := range flags {
		if _, ok := sf.Properties[name]; !ok {
			t.Errorf("values.schema.json: devicePlugin.flags has no %s", name)
		}
	}
	for name := range sf.Properties {
		if _, ok := flags[name]; !ok {
			t.Errorf("values.schema.json: devicePlugin.flags.%s is not in values.yaml", name)
		}
	}
}
