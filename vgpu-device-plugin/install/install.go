package install

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
)

// Command is the agent's subcommand that installs libvgpu.so.
const Command = "install-libvgpu"

// DefaultSource is where the agent image carries libvgpu.so (package
// images, LibvgpuPath).
const DefaultSource = "/usr/local/vshare/lib/libvgpu.so"

// File copies the regular file from to the path to, atomically: the content
// goes to a temporary file in to's directory, which is synced, made 0644
// and renamed over to, and the directory is synced. Readers of to see the
// old file or the new one, never a part; processes that have the old one
// mapped (containers that preloaded libvgpu.so) keep it. Errors name the
// path that failed.
func File(from, to string) (err error) {
	src, err := os.Open(from)
	if err != nil {
		return fmt.Errorf("install %s: %w", from, err)
	}
	defer src.Close()
	fi, err := src.Stat()
	if err != nil {
		return fmt.Errorf("install %s: %w", from, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("install %s: not a regular file (%s)", from, fi.Mode().Type())
	}
	dir := filepath.Dir(to)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(to)+".new-")
	if err != nil {
		return fmt.Errorf("install %s into %s: %w", from, dir, err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err := io.Copy(tmp, src); err != nil {
		return fmt.Errorf("install: write %s: %w", tmp.Name(), err)
	}
	if err := tmp.Chmod(0o644); err != nil {
		return fmt.Errorf("install: chmod %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("install: fsync %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("install: close %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), to); err != nil {
		return fmt.Errorf("install: rename %s over %s: %w", tmp.Name(), to, err)
	}
	return syncDir(dir)
}

// syncDir makes the rename durable.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("install: fsync %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("install: fsync %s: %w", dir, err)
	}
	return nil
}

// ErrUsage is wrapped by ParseArgs' errors.
var ErrUsage = errors.New("usage: vgpu-device-plugin " + Command + " [--from " + DefaultSource + "] --to <host directory>/libvgpu.so")

// Args are the subcommand's flags.
type Args struct {
	// From is the file to install (--from, default DefaultSource).
	From string
	// To is its path on the host (--to), in a directory that exists.
	To string
}

// ParseArgs reads the subcommand's command line (the arguments after
// install-libvgpu); errors name the flag and the value and wrap ErrUsage.
func ParseArgs(args []string) (Args, error) {
	a := Args{From: DefaultSource}
	fs := pflag.NewFlagSet(Command, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&a.From, "from", a.From, "the file to install")
	fs.StringVar(&a.To, "to", "", "its path on the host")
	if err := fs.Parse(args); err != nil {
		return Args{}, fmt.Errorf("%w: %w", ErrUsage, err)
	}
	switch {
	case fs.NArg() > 0:
		return Args{}, fmt.Errorf("%w: unexpected arguments %q", ErrUsage, fs.Args())
	case !filepath.IsAbs(a.From):
		return Args{}, fmt.Errorf("%w: --from=%q: want an absolute path", ErrUsage, a.From)
	case !filepath.IsAbs(a.To) || strings.HasSuffix(a.To, "/") || filepath.Clean(a.To) == "/":
		return Args{}, fmt.Errorf("%w: --to=%q: want an absolute file path", ErrUsage, a.To)
	}
	return a, nil
}
