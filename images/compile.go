package images

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// goProgram is one `go build` of a main package for linux/amd64.
type goProgram struct {
	// Pkg is the package, relative to the module root ("./cmd/vc-scheduler").
	Pkg string
	// Out is the binary's path. It stays between builds: the go command
	// does not link again when the binary there is up to date.
	Out     string
	LDFlags string
	Tags    []string
	// Sysroot, when set, turns cgo on and compiles and links the C parts
	// against it; otherwise CGO_ENABLED=0.
	Sysroot *Sysroot
}

// goBuild runs `go build -trimpath -buildvcs=false` with an environment
// that does not depend on the caller's: GOFLAGS and GOEXPERIMENT emptied,
// GOAMD64=v1, the cgo flags set here or emptied.
func goBuild(ctx context.Context, o Options, p goProgram) error {
	args := []string{"build", "-trimpath", "-buildvcs=false", "-ldflags", p.LDFlags}
	if len(p.Tags) > 0 {
		args = append(args, "-tags", strings.Join(p.Tags, ","))
	}
	args = append(args, "-o", p.Out, p.Pkg)
	env := []string{"GOOS=linux", "GOARCH=amd64", "GOAMD64=v1", "GOFLAGS=", "GOEXPERIMENT=",
		"CGO_CPPFLAGS=", "CGO_CXXFLAGS=", "CGO_FFLAGS="}
	if p.Sysroot == nil {
		env = append(env, "CGO_ENABLED=0", "CGO_CFLAGS=", "CGO_LDFLAGS=")
	} else {
		// The sysroot's path is in the cache directory, which differs
		// between machines: -ffile-prefix-map keeps it out of the
		// objects (and -trimpath keeps these flags out of the binary's
		// build information).
		env = append(env, "CGO_ENABLED=1", "CC="+o.CC,
			"CGO_CFLAGS=-O2 -g --sysroot="+p.Sysroot.Dir+" -ffile-prefix-map="+p.Sysroot.Dir+"=/",
			"CGO_LDFLAGS="+strings.TrimPrefix(p.Sysroot.CC(o.CC), o.CC+" "))
	}
	return run(ctx, o.Log, o.Root, env, o.Go, args...)
}

// buildLibvgpu builds libvgpu.so against the sysroot with libvgpu's own
// Makefile (`make libvgpu.so`) into out, unless out was built from the
// same sources with the same compiler and sysroot (cCache). It builds in a
// copy of libvgpu's sources in a fresh temporary directory: the checkout's
// libvgpu/build holds objects of the host's glibc that make would reuse,
// and -ffile-prefix-map turns the directory's random name into
// /usr/src/vshare/libvgpu, so the library does not depend on where it was
// built. It is the release library, without libvgpu's test hooks
// (CheckNoTestHooks refuses one that has them).
func buildLibvgpu(ctx context.Context, o Options, s Sysroot, out string) error {
	src := filepath.Join(o.Root, "libvgpu")
	build := func() error { return makeLibvgpu(ctx, o, s, "libvgpu.so", out) }
	if err := cCache(ctx, o, s, src, libvgpuInputs, out, build); err != nil {
		return fmt.Errorf("libvgpu: %w", err)
	}
	if err := CheckNoTestHooks(out); err != nil {
		return err
	}
	return CheckGLIBC(out, GLIBCFloor)
}

// libvgpuInputs are what libvgpu's Makefile needs to build the library.
var libvgpuInputs = []string{"Makefile", "src", "include"}

// makeLibvgpu runs `make target` of libvgpu's Makefile in a fresh copy of
// its sources, against the sysroot, with buildLibvgpu's flags, and copies
// the target to out. buildLibvgpu makes libvgpu.so; the test of
// CheckNoTestHooks makes build/libvgpu-hooks.so, the same library with the
// test hooks, to show that the check finds them.
func makeLibvgpu(ctx context.Context, o Options, s Sysroot, target, out string) error {
	src := filepath.Join(o.Root, "libvgpu")
	tmp, err := os.MkdirTemp("", "vshare-libvgpu-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	for _, p := range libvgpuInputs {
		if err := run(ctx, io.Discard, "", nil, "cp", "-R", filepath.Join(src, p), tmp); err != nil {
			return fmt.Errorf("copy %s: %w", p, err)
		}
	}
	cflags := strings.Join(append([]string{"-O2", "-g"}, reproducibleCFlags(s, tmp, "/usr/src/vshare/libvgpu")...), " ")
	if err := run(ctx, o.Log, "", nil, "make", "-s", "-C", tmp, target, "CC="+s.CC(o.CC), "CFLAGS="+cflags); err != nil {
		return err
	}
	return copyFile(filepath.Join(tmp, target), out)
}

// buildWorkload compiles e2e/testdata/gpuworkload.c against the sysroot
// (the flags of e2e/framework's host build, plus the sysroot's), unless
// out was built from the same source, compiler and sysroot.
func buildWorkload(ctx context.Context, o Options, s Sysroot, out string) error {
	dir := filepath.Join(o.Root, "e2e", "testdata")
	build := func() error {
		args := append(strings.Fields(s.CC(o.CC))[1:], "-O2", "-Wall", "-Wextra")
		args = append(args, reproducibleCFlags(s, o.Root, "/usr/src/vshare")...)
		args = append(args, "-o", out, filepath.Join(dir, "gpuworkload.c"), "-ldl")
		return run(ctx, o.Log, "", nil, o.CC, args...)
	}
	if err := cCache(ctx, o, s, dir, []string{"gpuworkload.c"}, out, build); err != nil {
		return fmt.Errorf("gpuworkload: %w", err)
	}
	return CheckGLIBC(out, GLIBCFloor)
}

// cCache runs build unless out exists and out.inputs records the same
// inputs as now: the content of every file under dir/inputs (with its
// path), the compiler's and the linker's versions (`cc --version`, `ld
// --version`; Debian's strings name the package revision) and the
// sysroot's directory, named after debian.lock's checksums. The C builds
// are then no cost when nothing they read changed, as the go command's
// cache makes the Go ones.
func cCache(ctx context.Context, o Options, s Sysroot, dir string, inputs []string, out string, build func() error) error {
	h := sha256.New()
	fmt.Fprintf(h, "sysroot %s\n", s.Dir)
	for _, tool := range [][]string{{o.CC, "--version"}, {o.CC, "-print-prog-name=ld"}} {
		v, err := exec.CommandContext(ctx, tool[0], tool[1:]...).Output()
		if err != nil {
			return fmt.Errorf("%s: %w", strings.Join(tool, " "), err)
		}
		fmt.Fprintf(h, "%s\n", v)
		if tool[1] == "-print-prog-name=ld" {
			ld, err := exec.CommandContext(ctx, strings.TrimSpace(string(v)), "--version").Output()
			if err != nil {
				return fmt.Errorf("ld --version: %w", err)
			}
			fmt.Fprintf(h, "%s\n", ld)
		}
	}
	for _, in := range inputs {
		err := filepath.WalkDir(filepath.Join(dir, in), func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			fmt.Fprintf(h, "%s %d %x\n", rel, d.Type(), sha256.Sum256(data))
			return nil
		})
		if err != nil {
			return err
		}
	}
	key := hex.EncodeToString(h.Sum(nil))
	stampFile := out + ".inputs"
	if old, err := os.ReadFile(stampFile); err == nil && string(old) == key {
		if _, err := os.Stat(out); err == nil {
			return nil
		}
	}
	os.Remove(stampFile)
	if err := build(); err != nil {
		return err
	}
	return os.WriteFile(stampFile, []byte(key), 0o644)
}

// reproducibleCFlags map the build directory and the sysroot to fixed
// names in debug information and __FILE__, and keep the compiler's command
// line (which names both) out of DW_AT_producer.
func reproducibleCFlags(s Sysroot, buildDir, as string) []string {
	return []string{
		"-ffile-prefix-map=" + buildDir + "=" + as,
		"-ffile-prefix-map=" + s.Dir + "=/",
		"-gno-record-gcc-switches",
	}
}

// run runs a command in dir (the current directory when empty) with extra
// environment on top of this process's. It logs the command line; the
// command's output (cgo's warnings about go-nvml's deprecated functions on
// every cold build) is shown only when it fails, as the error's tail.
func run(ctx context.Context, log io.Writer, dir string, env []string, name string, args ...string) error {
	fmt.Fprintf(log, "%s %s\n", name, strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	if err := cmd.Run(); err != nil {
		tail := out.Bytes()
		if len(tail) > 4096 {
			tail = tail[len(tail)-4096:]
		}
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail)
	}
	return nil
}

// copyFile copies a regular file's content to dst (created 0644, replaced
// by rename).
func copyFile(src, dst string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	tmp := dst + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}
