//go:build e2e

package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"

	"github.com/vgpushare/vshare/images"
)

// toolkit builds the NVIDIA container toolkit's stand-in
// (e2e/cmd/nvidia-container-runtime) and writes its config.toml: runc as
// the low-level runtime, the fake driver's device nodes and the stub
// driver libraries. It returns the runtime handler containerd runs every
// container with, as `nvidia-ctk runtime configure --set-as-default`
// leaves a GPU node; containerd's environment carries XDG_CONFIG_HOME to
// its shims and through them to the runtime, which reads its config.toml
// there as the real one does.
func (rc *RealCluster) toolkit(ctx context.Context, work string, bins Binaries, stubDir string) (*RuntimeHandler, error) {
	root, err := ModuleRoot()
	if err != nil {
		return nil, err
	}
	bin := filepath.Join(bins.Own, "nvidia-container-runtime")
	if err := goBuild(ctx, root, bin, "./e2e/cmd/nvidia-container-runtime", os.Stderr); err != nil {
		return nil, err
	}
	runc, err := runcPath()
	if err != nil {
		return nil, err
	}
	home := filepath.Join(work, "toolkit")
	conf := filepath.Join(home, "nvidia-container-runtime", "config.toml")
	if err := os.MkdirAll(filepath.Dir(conf), 0o755); err != nil {
		return nil, fmt.Errorf("toolkit config directory: %w", err)
	}
	body := fmt.Sprintf("[nvidia-container-runtime]\nruntimes = [%s]\n\n[fake-driver]\ndevice-dir = %s\nlibrary-dir = %s\n",
		strconv.Quote(runc), strconv.Quote(rc.DriverDir), strconv.Quote(stubDir))
	if err := os.WriteFile(conf, []byte(body), 0o644); err != nil {
		return nil, fmt.Errorf("write %s: %w", conf, err)
	}
	return &RuntimeHandler{Name: "nvidia", BinaryName: bin, Env: []string{"XDG_CONFIG_HOME=" + home}}, nil
}

// buildDriverLibraries builds the stub libcuda.so.1 and libnvidia-ml.so.1
// (libvgpu/test/stub, the driver's user-space libraries here) into out
// against the images' glibc 2.31 sysroot, as NVIDIA builds its driver's
// libraries against an old glibc: the toolkit mounts them into images of
// any distribution, the agent's (bullseye's glibc) among them. It builds in
// a copy of libvgpu's sources: libvgpu/build holds the host's build.
func buildDriverLibraries(ctx context.Context, log io.Writer, out string) error {
	root, err := ModuleRoot()
	if err != nil {
		return err
	}
	cache, err := os.UserCacheDir()
	if err != nil {
		cache = os.TempDir()
	}
	sysroot, err := images.PrepareSysroot(ctx, filepath.Join(cache, "vshare"), "", log)
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "vshare-stub-")
	if err != nil {
		return fmt.Errorf("stub build directory: %w", err)
	}
	defer os.RemoveAll(tmp)
	src := filepath.Join(root, "libvgpu")
	cp := exec.CommandContext(ctx, "cp", "-R", filepath.Join(src, "Makefile"), filepath.Join(src, "include"), filepath.Join(src, "test"), tmp)
	if b, err := cp.CombinedOutput(); err != nil {
		return fmt.Errorf("copy libvgpu's sources: %w\n%s", err, b)
	}
	libs := []string{"build/stub/libcuda.so.1", "build/stub/libnvidia-ml.so.1"}
	mk := exec.CommandContext(ctx, "make", append([]string{"-s", "-C", tmp, "CC=" + sysroot.CC("gcc")}, libs...)...)
	if b, err := mk.CombinedOutput(); err != nil {
		return fmt.Errorf("build the stub driver libraries against glibc %s: %w\n%s", sysroot.GLIBC, err, b)
	}
	if err := os.MkdirAll(out, 0o755); err != nil {
		return fmt.Errorf("create %s: %w", out, err)
	}
	for _, l := range libs {
		if err := copyFile(filepath.Join(tmp, l), filepath.Join(out, filepath.Base(l))); err != nil {
			return fmt.Errorf("install %s: %w", l, err)
		}
		if err := images.CheckGLIBC(filepath.Join(out, filepath.Base(l)), images.GLIBCFloor); err != nil {
			return err
		}
	}
	return nil
}
