package images

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestLibvgpuLoadsOnTheGLIBCFloor builds libvgpu.so against the sysroot as
// Build does, checks that its ELF version needs stop at GLIBC_2.31, and
// runs a probe under glibc 2.31's own loader with libvgpu.so preloaded: the
// probe must run on 2.31, find cuInit in libvgpu.so and get the answer of
// libvgpu's hook (CUDA_ERROR_NOT_INITIALIZED: no driver here), and libvgpu
// must log its initialisation.
func TestLibvgpuLoadsOnTheGLIBCFloor(t *testing.T) {
	s := testSysroot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	o := Options{Root: moduleRoot(t), CC: "gcc", Log: io.Discard}
	lib := filepath.Join(dir, "libvgpu.so")
	if err := buildLibvgpu(ctx, o, s, lib); err != nil {
		t.Fatal(err)
	}
	if err := CheckGLIBC(lib, GLIBCFloor); err != nil {
		t.Fatal(err)
	}

	probe := filepath.Join(dir, "floorprobe")
	args := append(strings.Fields(s.CC("gcc"))[1:], "-O2", "-Wall", "-o", probe, "testdata/floorprobe.c", "-ldl")
	if out, err := exec.CommandContext(ctx, "gcc", args...).CombinedOutput(); err != nil {
		t.Fatalf("compile the probe against the sysroot: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(ctx, s.Loader(), "--library-path", s.LibraryPath(), probe)
	cmd.Env = []string{"LD_PRELOAD=" + lib, "LIBCUDA_LOG_LEVEL=3"}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("probe under the %s loader: %v\nstdout:\n%s\nstderr:\n%s", GLIBCFloor, err, &stdout, &stderr)
	}
	for _, want := range []string{"glibc=" + GLIBCFloor + "\n", "cuInit.object=" + lib + "\n", "cuInit=3\n"} {
		if !strings.Contains(stdout.String(), want) {
			t.Errorf("probe output lacks %q:\n%s", want, &stdout)
		}
	}
	if !strings.Contains(stderr.String(), "[libvgpu ") || !strings.Contains(stderr.String(), "initialised") {
		t.Errorf("libvgpu did not log its initialisation; stderr:\n%s", &stderr)
	}
}

// TestCheckGLIBCRejectsAHostBuild: libvgpu.so built with the host's
// compiler and glibc (2.36 on Debian bookworm) fails the check, naming a
// version above the floor. If the host's glibc is itself 2.31 or older,
// the check has nothing to catch and this test fails to say so.
func TestCheckGLIBCRejectsAHostBuild(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	for _, p := range []string{"Makefile", "src", "include"} {
		if out, err := exec.Command("cp", "-R", filepath.Join(moduleRoot(t), "libvgpu", p), dir).CombinedOutput(); err != nil {
			t.Fatalf("copy libvgpu/%s: %v\n%s", p, err, out)
		}
	}
	if out, err := exec.CommandContext(ctx, "make", "-s", "-C", dir, "libvgpu.so").CombinedOutput(); err != nil {
		t.Fatalf("host build of libvgpu.so: %v\n%s", err, out)
	}
	err := CheckGLIBC(filepath.Join(dir, "libvgpu.so"), GLIBCFloor)
	if err == nil || !strings.Contains(err.Error(), "above the glibc floor 2.31") {
		t.Fatalf("CheckGLIBC(host-built libvgpu.so) = %v, want an error naming a version above 2.31", err)
	}
	t.Log(err)
}

func TestGLIBCVersionOrder(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		less bool
	}{
		{"GLIBC_2.2.5", "GLIBC_2.31", true},
		{"GLIBC_2.31", "GLIBC_2.31", false},
		{"GLIBC_2.32", "GLIBC_2.31", false},
		{"GLIBC_2.31", "GLIBC_2.34", true},
		{"GLIBC_2.3", "GLIBC_2.3.4", true},
	} {
		a, okA := glibcVersion(tc.a)
		b, okB := glibcVersion(tc.b)
		if !okA || !okB || versionLess(a, b) != tc.less {
			t.Errorf("%s < %s = %v, want %v", tc.a, tc.b, versionLess(a, b), tc.less)
		}
	}
	for _, marker := range []string{"GLIBC_PRIVATE", "GLIBC_ABI_DT_RELR"} {
		if _, ok := glibcVersion(marker); ok {
			t.Errorf("%s parsed as a version", marker)
		}
	}
}

// TestCheckGLIBCErrors: a file that is not ELF, or a floor that is not a
// version, is an error naming it.
func TestCheckGLIBCErrors(t *testing.T) {
	notELF := filepath.Join(t.TempDir(), "x")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := CheckGLIBC(notELF, GLIBCFloor); err == nil || !strings.Contains(err.Error(), notELF) {
		t.Errorf("CheckGLIBC(not ELF) = %v, want an error naming %s", err, notELF)
	}
	if err := CheckGLIBC(notELF, "two"); err == nil || !strings.Contains(err.Error(), `"two"`) {
		t.Errorf("CheckGLIBC(floor two) = %v, want an error naming it", err)
	}
}
