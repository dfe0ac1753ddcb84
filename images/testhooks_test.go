package images

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestReleaseLibvgpuHasNoTestHooks builds libvgpu.so as Build does
// (buildLibvgpu: `make libvgpu.so` against the sysroot) and checks that it
// names none of libvgpu's test hooks, then builds the same library with
// them (`make build/libvgpu-hooks.so`, the same flags plus
// -DVGPU_TEST_HOOKS) and checks that CheckNoTestHooks refuses it, naming
// the hook: the check can fail, and what ships passes it.
func TestReleaseLibvgpuHasNoTestHooks(t *testing.T) {
	s := testSysroot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	o := Options{Root: moduleRoot(t), CC: "gcc", Log: io.Discard}

	release := filepath.Join(dir, "libvgpu.so")
	if err := buildLibvgpu(ctx, o, s, release); err != nil {
		t.Fatal(err)
	}
	if err := CheckNoTestHooks(release); err != nil {
		t.Errorf("the release build: %v", err)
	}

	hooks := filepath.Join(dir, "libvgpu-hooks.so")
	if err := makeLibvgpu(ctx, o, s, "build/libvgpu-hooks.so", hooks); err != nil {
		t.Fatal(err)
	}
	err := CheckNoTestHooks(hooks)
	if err == nil || !strings.Contains(err.Error(), LibvgpuTestHooks[0]) {
		t.Fatalf("CheckNoTestHooks(the hooks build) = %v, want an error naming %s", err, LibvgpuTestHooks[0])
	}
	t.Log(err)
	b, err := os.ReadFile(hooks)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range LibvgpuTestHooks {
		if !bytes.Contains(b, []byte(v)) {
			t.Errorf("the hooks build does not name %s: the check would not see it in a release build", v)
		}
	}
}
