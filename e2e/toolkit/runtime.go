package toolkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/vgpushare/vshare/e2e/fakedriver"
)

// listTimeout bounds asking the fake driver for its cards.
const listTimeout = 10 * time.Second

// Runtime is one invocation of the stand-in: runc's command line and where
// to read the configuration and the bundle.
type Runtime struct {
	// Args are the arguments after the program name, as for runc.
	Args []string
	// Config is the configuration (LoadConfig).
	Config Config
	// Cwd is the working directory, the bundle when no --bundle is given.
	Cwd string
	// ListCards asks the fake driver for its cards; nil means
	// fakedriver.ListCards on the configured control socket.
	ListCards func(socket string) ([]fakedriver.Card, error)
}

// Prepare does the stand-in's work before the low-level runtime runs: on
// `create` it edits the bundle's config.json (Modify). It returns the
// low-level runtime to exec with the same arguments.
func (r *Runtime) Prepare() (string, error) {
	runtime, err := lowLevelRuntime(r.Config.Runtime.Runtimes)
	if err != nil {
		return "", err
	}
	if !HasCreateSubcommand(r.Args) {
		return runtime, nil
	}
	bundle, err := BundleDir(r.Args, r.Cwd)
	if err != nil {
		return "", err
	}
	if err := r.editBundle(filepath.Join(bundle, "config.json")); err != nil {
		return "", err
	}
	return runtime, nil
}

// editBundle modifies the spec at path in place, keeping its file mode.
func (r *Runtime) editBundle(path string) error {
	fi, err := os.Stat(path)
	if err != nil {
		return fmt.Errorf("read OCI spec: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("read OCI spec: %w", err)
	}
	var spec specs.Spec
	if err := json.Unmarshal(b, &spec); err != nil {
		return fmt.Errorf("parse OCI spec %s: %w", path, err)
	}
	cards, err := r.cards(spec)
	if err != nil {
		return err
	}
	changed, err := Modify(&spec, cards, r.Config)
	if err != nil || !changed {
		return err
	}
	out, err := json.Marshal(&spec)
	if err != nil {
		return fmt.Errorf("encode OCI spec: %w", err)
	}
	if err := os.WriteFile(path, out, fi.Mode().Perm()); err != nil {
		return fmt.Errorf("write OCI spec: %w", err)
	}
	return nil
}

// cards lists the driver's cards when the container asks for the driver
// at all: one that asks for nothing (void) runs even with no driver.
func (r *Runtime) cards(spec specs.Spec) ([]fakedriver.Card, error) {
	var env []string
	if spec.Process != nil {
		env = spec.Process.Env
	}
	// Against no cards a request is void or fails; void needs no driver.
	if req, err := ReadRequest(env, nil, splitList(r.Config.SupportedDriverCapabilities)); err == nil && len(req.Capabilities) == 0 {
		return nil, nil
	}
	if r.Config.FakeDriver.DeviceDir == "" {
		return nil, ErrNoFakeDriver
	}
	list := r.ListCards
	if list == nil {
		list = func(socket string) ([]fakedriver.Card, error) { return fakedriver.ListCards(socket, listTimeout) }
	}
	cards, err := list(filepath.Join(r.Config.FakeDriver.DeviceDir, fakedriver.ControlNode))
	if err != nil {
		return nil, fmt.Errorf("list the GPUs: %w", err)
	}
	return cards, nil
}

// lowLevelRuntime is the first candidate that is an existing executable
// file; a candidate that is not a path is looked up in PATH.
func lowLevelRuntime(candidates []string) (string, error) {
	for _, c := range candidates {
		if !strings.Contains(c, "/") {
			if p, err := exec.LookPath(c); err == nil {
				return p, nil
			}
			continue
		}
		if fi, err := os.Stat(c); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("no low-level runtime found among nvidia-container-runtime.runtimes %v", candidates)
}

// HasCreateSubcommand reports whether runc's arguments hold the `create`
// command, a bundle directory named "create" aside (the toolkit's
// oci.HasCreateSubcommand).
func HasCreateSubcommand(args []string) bool {
	previousWasBundle := false
	for _, a := range args {
		if !previousWasBundle && isBundleFlag(a) {
			previousWasBundle = true
			continue
		}
		if !previousWasBundle && a == "create" {
			return true
		}
		previousWasBundle = false
	}
	return false
}

// BundleDir is the bundle of runc's arguments (--bundle, -bundle or -b,
// with its value after a space or '='), or cwd when there is none, as
// runc takes it (the toolkit's oci.GetBundleDir).
func BundleDir(args []string, cwd string) (string, error) {
	dir := ""
	for i := 0; i < len(args); i++ {
		flag, value, hasValue := strings.Cut(args[i], "=")
		if !isBundleFlag(flag) {
			continue
		}
		switch {
		case hasValue:
			dir = value
		case i+1 < len(args):
			dir = args[i+1]
			i++
		default:
			return "", errors.New("bundle option requires an argument")
		}
	}
	if dir == "" {
		return cwd, nil
	}
	return dir, nil
}

func isBundleFlag(arg string) bool {
	if !strings.HasPrefix(arg, "-") {
		return false
	}
	trimmed := strings.TrimLeft(arg, "-")
	return trimmed == "b" || trimmed == "bundle"
}

// ReportError tells containerd why the runtime failed: on stderr, and as
// runc does in its --log file (a JSON line with level "error" when
// --log-format is json), where containerd's runc shim reads the error it
// reports ("OCI runtime create failed: ...").
func ReportError(args []string, err error, now time.Time) {
	fmt.Fprintf(os.Stderr, "nvidia-container-runtime: %v\n", err)
	path, asJSON := LogFile(args)
	if path == "" {
		return
	}
	f, ferr := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if ferr != nil {
		return
	}
	defer f.Close()
	msg := "nvidia-container-runtime: " + err.Error()
	if asJSON {
		line, _ := json.Marshal(map[string]string{"level": "error", "msg": msg, "time": now.UTC().Format(time.RFC3339Nano)})
		fmt.Fprintf(f, "%s\n", line)
		return
	}
	fmt.Fprintf(f, "time=%q level=error msg=%q\n", now.UTC().Format(time.RFC3339Nano), msg)
}

// LogFile returns runc's --log file and whether --log-format is json:
// where containerd's shim reads a failed command's error from.
func LogFile(args []string) (path string, json bool) {
	format := ""
	for i := 0; i < len(args); i++ {
		flag, value, hasValue := strings.Cut(args[i], "=")
		name := strings.TrimLeft(flag, "-")
		if !strings.HasPrefix(flag, "-") || (name != "log" && name != "log-format") {
			continue
		}
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
			i++
		}
		if name == "log" {
			path = value
		} else {
			format = value
		}
	}
	return path, format == "json"
}
