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

// TestReleaseLibvgpuHasNoTestHooks builds libvgpu.so with libvgpu's test
// hooks (`make build/libvgpu-hooks.so`: Build's flags plus
// -DVGPU_TEST_HOOKS) and checks that CheckNoTestHooks refuses it, naming
// the hook: the check can fail. The release build passes it inside
// buildLibvgpu, which TestLibvgpuLoadsOnTheGLIBCFloor runs (one build of
// the release library for both).
func TestReleaseLibvgpuHasNoTestHooks(t *testing.T) {
	s := testSysroot(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	o := Options{Root: moduleRoot(t), CC: "gcc", Log: io.Discard}

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
