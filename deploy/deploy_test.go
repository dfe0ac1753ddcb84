package deploy_test

import (
	"encoding/json"
	"os"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/vgpushare/vshare/config"
	"github.com/vgpushare/vshare/deploy"
)

// TestPlainDeviceConfigIsDefault: the ConfigMap the plain manifests ship
// is exactly the built-in defaults, so installing it changes nothing until
// an operator edits it.
func TestPlainDeviceConfigIsDefault(t *testing.T) {
	ms, err := deploy.ReadManifests(deploy.PlainManifests)
	if err != nil {
		t.Fatal(err)
	}
	cm, err := deploy.ConfigMapWith(ms, config.ConfigKey)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Name != config.DefaultConfigMapName || cm.Namespace != config.DefaultConfigMapNamespace {
		t.Errorf("device ConfigMap %s/%s, want %s/%s", cm.Namespace, cm.Name, config.DefaultConfigMapNamespace, config.DefaultConfigMapName)
	}
	got, err := config.FromConfigMap(&cm)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(config.Default(), got); diff != "" {
		t.Errorf("device config (-default +manifest):\n%s", diff)
	}
}

func values(t *testing.T, path ...string) map[string]any {
	t.Helper()
	v, err := deploy.Values(deploy.ChartValues, path...)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestChartValuesListEveryArgument: the chart's deviceshare values are
// exactly the plugin's argument keys (read from deviceshare/pluginargs/args.go).
func TestChartValuesListEveryArgument(t *testing.T) {
	consts, err := deploy.StringConstants("../deviceshare/pluginargs", false, "Arg")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, key := range consts {
		if name, ok := strings.CutPrefix(key, "deviceshare."); ok {
			want = append(want, name)
		}
	}
	var got []string
	for k := range values(t, "deviceshare") {
		got = append(got, k)
	}
	sort.Strings(want)
	sort.Strings(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deviceshare values vs plugin arguments (-args.go +values.yaml):\n%s", diff)
	}
}

// TestChartSchemaListsEveryArgument: values.schema.json closes the
// deviceshare section over exactly the plugin's arguments, so a misspelt
// argument fails at install instead of being logged by the scheduler.
func TestChartSchemaListsEveryArgument(t *testing.T) {
	got := schemaProperties(t, "deviceshare")
	want := values(t, "deviceshare")
	var g, w []string
	for k := range got {
		g = append(g, k)
	}
	for k := range want {
		w = append(w, k)
	}
	sort.Strings(g)
	sort.Strings(w)
	if diff := cmp.Diff(w, g); diff != "" {
		t.Errorf("deviceshare properties (-values.yaml +values.schema.json):\n%s", diff)
	}
}

// schemaProperties returns the properties of the values schema at path.
func schemaProperties(t *testing.T, path ...string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(deploy.ChartSchema)
	if err != nil {
		t.Fatal(err)
	}
	var node map[string]any
	if err := json.Unmarshal(data, &node); err != nil {
		t.Fatalf("%s: %v", deploy.ChartSchema, err)
	}
	for _, p := range append(path, "") {
		props, ok := node["properties"].(map[string]any)
		if !ok {
			t.Fatalf("%s: no properties at %v", deploy.ChartSchema, path)
		}
		if p == "" {
			return props
		}
		if node, ok = props[p].(map[string]any); !ok {
			t.Fatalf("%s: no %s at %v", deploy.ChartSchema, p, path)
		}
	}
	return nil
}

// TestChartValuesCoverDeviceConfig: the chart's default device document
// is the built-in defaults, and every field of the document's schema is in
// values.yaml, set or shown in a comment.
func TestChartValuesCoverDeviceConfig(t *testing.T) {
	text, err := os.ReadFile(deploy.ChartValues)
	if err != nil {
		t.Fatal(err)
	}
	doc := values(t, "deviceConfig")["config"]
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := config.Parse(data)
	if err != nil {
		t.Fatalf("values.yaml deviceConfig.config: %v", err)
	}
	if diff := cmp.Diff(config.Default(), got); diff != "" {
		t.Errorf("values.yaml deviceConfig.config differs from the built-in defaults (-default +values):\n%s", diff)
	}
	for _, path := range deploy.ConfigPaths() {
		if present(doc, strings.Split(path, ".")) {
			continue
		}
		leaf := path[strings.LastIndex(path, ".")+1:]
		leaf = strings.TrimSuffix(leaf, "[]")
		if !regexp.MustCompile(`(?m)^\s*#\s*(\(HAMi\)\s*)?(- )?` + regexp.QuoteMeta(leaf) + `:`).Match(text) {
			t.Errorf("values.yaml deviceConfig.config has no %s, set or commented", path)
		}
	}
}

// present reports whether the path (keys, a "[]" suffix for a list whose
// elements are looked into) exists in tree.
func present(tree any, path []string) bool {
	if len(path) == 0 {
		return true
	}
	obj, ok := tree.(map[string]any)
	if !ok {
		return false
	}
	key, isList := strings.CutSuffix(path[0], "[]")
	v, ok := obj[key]
	if !ok {
		return false
	}
	if list, ok := v.([]any); ok && isList {
		for _, item := range list {
			if present(item, path[1:]) {
				return true
			}
		}
		return len(path) == 1
	}
	return present(v, path[1:])
}

// TestDashboardMetricsExist: every metric the Grafana dashboard queries is
// defined by the scheduler plugin or the node agent's exporter.
func TestDashboardMetricsExist(t *testing.T) {
	defined, err := deploy.MetricNames("../deviceshare/metrics", "../vgpu-device-plugin/monitor")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"volcano_deviceshare_filter_failures_total", "volcano_deviceshare_card_pods", "vGPU_device_memory_usage_in_bytes"} {
		if !defined[want] {
			t.Fatalf("the source scan misses %s; found %v", want, defined)
		}
	}
	data, err := os.ReadFile(deploy.Dashboard)
	if err != nil {
		t.Fatal(err)
	}
	exprs := dashboardExprs(t, data)
	if len(exprs) == 0 {
		t.Fatal("no queries in the dashboard")
	}
	used := map[string]bool{}
	for _, e := range exprs {
		for _, m := range promQLMetrics(e) {
			used[m] = true
			base := m
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(m, suffix); ok && defined[b] {
					base = b
				}
			}
			if !defined[base] {
				t.Errorf("dashboard query %q uses %s, which no code defines", e, m)
			}
		}
	}
	// The panels the dashboard exists for.
	for _, m := range []string{
		"volcano_deviceshare_card_memory_allocated_mib", "volcano_deviceshare_card_pods",
		"vGPU_device_memory_usage_in_bytes", "vGPU_device_memory_limit_in_bytes",
		"vGPU_device_sm_utilization_percent", "vGPU_device_sm_limit_percent",
		"volcano_deviceshare_filter_failures_total",
	} {
		if !used[m] {
			t.Errorf("the dashboard has no panel on %s", m)
		}
	}
}

// dashboardExprs returns every PromQL expression of the dashboard's panel
// targets and templating queries.
func dashboardExprs(t *testing.T, data []byte) []string {
	t.Helper()
	var d any
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("%s: %v", deploy.Dashboard, err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch x := v.(type) {
		case map[string]any:
			for k, val := range x {
				if s, ok := val.(string); ok && (k == "expr" || (k == "query" && strings.Contains(s, "("))) {
					out = append(out, s)
				}
				walk(val)
			}
		case []any:
			for _, val := range x {
				walk(val)
			}
		}
	}
	walk(d)
	sort.Strings(out)
	return out
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{[^}]*\}`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promNonMetric = map[string]bool{"and": true, "or": true, "unless": true, "offset": true, "bool": true}
)

// promQLMetrics returns the metric names a PromQL expression (or a Grafana
// label_values query) reads: identifiers outside label matchers, ranges and
// grouping clauses that are not function calls, keywords or numbers.
func promQLMetrics(expr string) []string {
	s := promStrings.ReplaceAllString(expr, " ")
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRanges.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	var out []string
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		id := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " ")
		if strings.HasPrefix(rest, "(") || promNonMetric[id] {
			continue
		}
		if loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.') {
			continue // 0.99, 1e3
		}
		// label_values(metric, label): the label is not a metric.
		if strings.HasPrefix(strings.TrimLeft(s[:loc[0]], " "), "label_values") && strings.HasPrefix(rest, ")") && strings.Contains(s[:loc[0]], ",") {
			continue
		}
		out = append(out, id)
	}
	return out
}

// TestPromQLMetrics: the extraction that TestDashboardMetricsExist relies on.
func TestPromQLMetrics(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`sum by (device, reason) (rate(volcano_deviceshare_filter_failures_total{node=~"$node"}[5m]))`, []string{"volcano_deviceshare_filter_failures_total"}},
		{`histogram_quantile(0.99, sum by (le) (rate(x_seconds_bucket[5m])))`, []string{"x_seconds_bucket"}},
		{`a{k="v"} / on (p, q) b`, []string{"a", "b"}},
		{`label_values(vGPU_device_memory_limit_in_bytes, podnamespace)`, []string{"vGPU_device_memory_limit_in_bytes"}},
		{`min(up) or vector(0)`, []string{"up"}},
	} {
		if diff := cmp.Diff(tc.want, promQLMetrics(tc.expr)); diff != "" {
			t.Errorf("promQLMetrics(%q) (-want +got):\n%s", tc.expr, diff)
		}
	}
}
