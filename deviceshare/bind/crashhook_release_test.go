//go:build !vsharetest

package bind

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	vcapi "volcano.sh/volcano/pkg/scheduler/api"
)

// releaseCrashEnv is the test-only hook's variable (crashhook.go, which this
// build does not compile).
const releaseCrashEnv = "VSHARE_TEST_CRASH_AT_BIND"

// A release build's binder ignores the variable: armed as the crash tests
// arm it, every bind still goes out and the process goes on (had it exited,
// the test binary would have died with it).
func TestReleaseBinderIgnoresCrashEnv(t *testing.T) {
	for _, value := range []string{"call:1", "1", "not a number"} {
		t.Run(value, func(t *testing.T) {
			t.Setenv(releaseCrashEnv, value)
			binder := New(Options{})
			if binder.crash != nil {
				t.Fatalf("release binder armed a crash hook: %+v", binder.crash)
			}
			client := fake.NewSimpleClientset(phasePod("a", ""), phasePod("b", ""))
			var bound atomic.Int64
			client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
				if action.GetSubresource() == "binding" {
					bound.Add(1)
					return true, nil, nil
				}
				return false, nil, nil
			})
			var tasks []*vcapi.TaskInfo
			for _, name := range []string{"a", "b"} {
				task := vcapi.NewTaskInfo(phasePod(name, ""))
				task.NodeName = "n" + name
				tasks = append(tasks, task)
			}
			binder.Bind(client, tasks)
			if bound.Load() != 2 {
				t.Errorf("%d bindings with %s=%s, want 2", bound.Load(), releaseCrashEnv, value)
			}
		})
	}
}

// The scheduler as images/ builds it (no build tags, CGO_ENABLED=0,
// -trimpath) carries no crash hook: crashhook.go is not among the package's
// files and the hook's variable is nowhere in the binary. The same binary
// built with vsharetest, as the e2e framework builds it, does carry it, which
// shows the check would see a hook that leaked into the release build.
func TestReleaseSchedulerHasNoCrashHook(t *testing.T) {
	files := func(tags string) string {
		out, err := goCommand(t, "list", "-tags", tags, "-f", "{{join .GoFiles \" \"}}", ".").Output()
		if err != nil {
			t.Fatalf("go list -tags %q: %v", tags, err)
		}
		return " " + strings.TrimSpace(string(out)) + " "
	}
	if release, test := files(""), files("vsharetest"); strings.Contains(release, " crashhook.go ") ||
		!strings.Contains(release, " crashhook_release.go ") || !strings.Contains(test, " crashhook.go ") {
		t.Fatalf("package files: release build %q, vsharetest build %q; want crashhook.go only with vsharetest", release, test)
	}
	if testing.Short() {
		t.Skip("builds the scheduler twice (about 15 s each)")
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		tags string
		want bool
	}{{tags: "", want: false}, {tags: "vsharetest", want: true}} {
		bin := filepath.Join(dir, "vc-scheduler"+tc.tags)
		cmd := goCommand(t, "build", "-tags", tc.tags, "-trimpath", "-o", bin, "github.com/vgpushare/vshare/cmd/vc-scheduler")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build -tags %q ./cmd/vc-scheduler: %v\n%s", tc.tags, err, out)
		}
		data, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if got := bytes.Contains(data, []byte(releaseCrashEnv)); got != tc.want {
			t.Errorf("vc-scheduler built with tags %q contains %s: %t, want %t", tc.tags, releaseCrashEnv, got, tc.want)
		}
	}
}

// goCommand runs the go command in this package's directory with the
// environment images/ builds with (no GOFLAGS that could add tags, no cgo).
func goCommand(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Env = append(os.Environ(), "GOFLAGS=", "CGO_ENABLED=0")
	return cmd
}
