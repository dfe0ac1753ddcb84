package images

import (
	"bytes"
	"fmt"
	"os"
)

// LibvgpuTestHooks are the environment variables only libvgpu's test build
// reads (libvgpu/src/env.c, compiled under -DVGPU_TEST_HOOKS: make's
// build/libvgpu-hooks.so and the sanitizer builds). The libvgpu.so that
// Build ships is `make libvgpu.so`, which never defines the macro; a
// library that names one of them could be made to kill or stop itself in
// the region lock by a container's environment.
var LibvgpuTestHooks = []string{"LIBVGPU_TEST_DIE_IN_LOCK", "LIBVGPU_TEST_STOP_IN_LOCK"}

// CheckNoTestHooks returns an error naming the file and the variable when
// the library at path contains the name of a test hook: the code that reads
// one always names it (getenv takes the name as a string literal), so a
// library without the names cannot read them.
func CheckNoTestHooks(path string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	for _, v := range LibvgpuTestHooks {
		if bytes.Contains(b, []byte(v)) {
			return fmt.Errorf("%s reads the test hook %s: a release build must not define VGPU_TEST_HOOKS", path, v)
		}
	}
	return nil
}
