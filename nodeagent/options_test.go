package nodeagent_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/vgpushare/vshare/nodeagent"
)

func TestOptionsFollowTheProfile(t *testing.T) {
	tests := []struct {
		name    string
		profile nodeagent.Profile
		args    []string
		want    []string // substrings of the error; none: valid
	}{
		{name: "defaults", profile: nodeagent.Profile{SocketName: "a.sock"}},
		{name: "socket name required", args: []string{"--socket-name="}, want: []string{`--socket-name="": want a file name other than kubelet.sock`}},
		{name: "socket name optional", profile: nodeagent.Profile{SocketNameOptional: true}},
		{name: "every bad value named", profile: nodeagent.Profile{SocketName: "a.sock", ResourceExample: "example.com/dev"},
			args: []string{"--node-name=", "--kubelet-socket-dir=dp", "--socket-name=kubelet.sock", "--resource-name=dev",
				"--configmap-namespace=Kube_System", "--configmap-name=", "--handshake-interval=1m", "--informer-wait=31s",
				"--allocation-timeout=0s"},
			want: []string{`--node-name=""`, `--kubelet-socket-dir="dp"`, `--socket-name="kubelet.sock"`,
				`--resource-name="dev": want an extended resource name like example.com/dev`, `--configmap-namespace="Kube_System"`,
				`--configmap-name=""`, "--handshake-interval=1m0s", "--informer-wait=31s", "--allocation-timeout=0s"}},
		{name: "no ConfigMap with a config file", profile: nodeagent.Profile{SocketName: "a.sock"},
			args: []string{"--config-file=/etc/dev.yaml", "--configmap-name="}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("NODE_NAME", "n1")
			o := nodeagent.NewOptions(tc.profile)
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs)
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			var p nodeagent.Problems
			o.Check(&p)
			if diff := cmp.Diff(tc.want, problems(p.Err(), tc.want)); diff != "" {
				t.Errorf("Check: the wanted problems (-want +found):\n%s\nin: %v", diff, p.Err())
			}
		})
	}
}

// problems returns those of want the error's message contains.
func problems(err error, want []string) []string {
	var found []string
	for _, w := range want {
		if err != nil && strings.Contains(err.Error(), w) {
			found = append(found, w)
		}
	}
	if err != nil && len(want) == 0 {
		return []string{err.Error()}
	}
	return found
}

func TestOptionsUsageComesFromTheProfile(t *testing.T) {
	o := nodeagent.NewOptions(nodeagent.Profile{SocketName: "a.sock", Usage: nodeagent.Usage{SocketName: "the socket"}})
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs)
	if f := fs.Lookup("socket-name"); f == nil || f.Usage != "the socket" || f.DefValue != "a.sock" {
		t.Errorf("--socket-name = %+v, want the profile's default and help", f)
	}
}

// A node agent started with --config-file refuses a document with a key
// nothing acts on, as the scheduler's Loader does: both read it with
// config.Parse, so the refusal names the same key with the same message.
func TestReadConfigFileRefusesUnsupportedKeys(t *testing.T) {
	path := filepath.Join(t.TempDir(), "device-config.yaml")
	if err := os.WriteFile(path, []byte("nodeconfig:\n- name: n1\n  migstrategy: mixed\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	o := &nodeagent.Options{ConfigFile: path}
	cfg, err := o.ReadConfigFile()
	want := `nodeconfig[0].migstrategy: Unsupported value: "mixed": not supported`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "--config-file=") {
		t.Fatalf("ReadConfigFile() = %v, %v; want an error naming --config-file and containing %q", cfg, err, want)
	}
}
