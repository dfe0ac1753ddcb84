package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/vgpushare/vshare/deploy"
	"github.com/vgpushare/vshare/deploy/agentflags"
)

// readDoc returns a page of this directory.
func readDoc(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// missing reports each wanted string the page does not contain, sorted,
// saying where the string comes from.
func missing(t *testing.T, page, text string, want map[string]string) {
	t.Helper()
	if len(want) == 0 {
		t.Fatalf("%s: nothing to look for; the source scan found nothing", page)
	}
	keys := make([]string, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if !strings.Contains(text, k) {
			t.Errorf("%s does not mention %q (%s)", page, k, want[k])
		}
	}
}

// constants collects string constants by name prefix from source
// directories (relative to the repository root), keyed by their trimmed
// value.
func constants(t *testing.T, prefix string, dirs ...string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, dir := range dirs {
		consts, err := deploy.StringConstants(filepath.Join("..", dir), true, prefix)
		if err != nil {
			t.Fatal(err)
		}
		for name, v := range consts {
			if v = strings.TrimSpace(v); v != "" {
				out[v] = dir + ": " + name
			}
		}
	}
	return out
}

// TestConfigurationCoversCode: every plugin argument, device ConfigMap
// field, node agent flag and environment variable the code reads or sets is
// in configuration.md.
func TestConfigurationCoversCode(t *testing.T) {
	const page = "configuration.md"
	text := readDoc(t, page)
	t.Run("plugin arguments", func(t *testing.T) {
		args, err := deploy.StringConstants("../deviceshare/pluginargs", false, "Arg")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		for name, key := range args {
			if strings.HasPrefix(key, "deviceshare.") {
				want["`"+key+"`"] = name
			}
		}
		missing(t, page, text, want)
	})
	t.Run("device ConfigMap fields", func(t *testing.T) {
		want := map[string]string{}
		for _, p := range deploy.ConfigPaths() {
			want["`"+p+"`"] = "json field of config.Config"
		}
		missing(t, page, text, want)
	})
	t.Run("agent flags", func(t *testing.T) {
		want := map[string]string{}
		for _, f := range agentflags.Flags() {
			want["`--"+f+"`"] = "vgpu-device-plugin flag"
		}
		missing(t, page, text, want)
	})
	t.Run("environment variables", func(t *testing.T) {
		want := constants(t, "Env", "vgpu-device-plugin", "nodeagent")
		for _, v := range getenvCalls(t, []string{"../vgpu-device-plugin", "../nodeagent"}, `Getenv\("([A-Z][A-Z0-9_]+)"\)`, ".go") {
			want[v] = "os.Getenv in the node agent"
		}
		for _, v := range getenvCalls(t, []string{"../libvgpu/src"}, `"((?:CUDA|LIBCUDA|LIBVGPU|GPU_CORE|NVIDIA)_[A-Z0-9_]+)"`, ".c", ".h") {
			want[v] = "libvgpu"
		}
		missing(t, page, text, want)
	})
}

// getenvCalls returns the first submatch of re in every non-test file
// under dirs with one of the extensions.
func getenvCalls(t *testing.T, dirs []string, re string, exts ...string) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	var out []string
	for _, dir := range dirs {
		walkFiles(t, dir, exts, func(data []byte) {
			for _, m := range rx.FindAllStringSubmatch(string(data), -1) {
				out = append(out, m[1])
			}
		})
	}
	if len(out) == 0 {
		t.Fatalf("no environment variables found under %s", strings.Join(dirs, ", "))
	}
	return out
}

// walkFiles calls read with every non-test file under dir with one of the
// extensions.
func walkFiles(t *testing.T, dir string, exts []string, read func([]byte)) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(path, "_test.go") {
			return err
		}
		for _, ext := range exts {
			if strings.HasSuffix(path, ext) {
				data, err := os.ReadFile(path)
				if err != nil {
					return err
				}
				read(data)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTroubleshootingCoversReasons: every failure reason the scheduler can
// report (Reason* constants of the plugin, the backends, the Ascend model
// and the config loader) and every event it records is explained.
func TestTroubleshootingCoversReasons(t *testing.T) {
	want := constants(t, "Reason", "deviceshare", "backends", "vnpu", "config")
	for v, src := range constants(t, "Event", "deviceshare") {
		want[v] = src
	}
	want["deviceshare plugin arguments are invalid"] = "deviceshare/plugin.go"
	missing(t, "troubleshooting.md", readDoc(t, "troubleshooting.md"), want)
}

// TestMetricsCoversCode: every metric the scheduler plugin and the node
// agent export is listed.
func TestMetricsCoversCode(t *testing.T) {
	names, err := deploy.MetricNames("../deviceshare/metrics", "../vgpu-device-plugin/monitor")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for n := range names {
		want["`"+n+"`"] = "metric"
	}
	missing(t, "metrics.md", readDoc(t, "metrics.md"), want)
}

// TestRequestingCoversProtocol: every resource, label and annotation the
// backends read or write is in requesting.md, as are the vGPU resource
// names of the default device configuration.
func TestRequestingCoversProtocol(t *testing.T) {
	want := map[string]string{}
	for _, prefix := range []string{"Annotation", "Label", "Resource"} {
		for v, src := range constants(t, prefix, "backends") {
			want["`"+v] = src
		}
	}
	for v, src := range constants(t, "DefaultResource", "config") {
		want["`"+v+"`"] = src
	}
	missing(t, "requesting.md", readDoc(t, "requesting.md"), want)
}

// TestREADMELinksDocs: the README's Documentation section links the user
// and operator pages.
func TestREADMELinksDocs(t *testing.T) {
	readme := readDoc(t, "../README.md")
	_, section, ok := strings.Cut(readme, "## Documentation")
	if !ok {
		t.Fatal("README.md has no Documentation section")
	}
	for _, p := range []string{"install.md", "requesting.md", "configuration.md", "metrics.md", "troubleshooting.md", "comparison.md", "architecture.md", "security.md", "kubectl-vshare.md"} {
		if _, err := os.Stat(p); err != nil {
			t.Errorf("docs/%s: %v", p, err)
		}
		if !strings.Contains(section, "docs/"+p) {
			t.Errorf("README.md's Documentation section does not link docs/%s", p)
		}
	}
}
