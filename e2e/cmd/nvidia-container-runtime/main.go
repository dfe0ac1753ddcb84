// Command nvidia-container-runtime is the test node's stand-in for the
// NVIDIA container toolkit's runtime (package toolkit): containerd's runc
// shim runs it in runc's place; on `create` it gives the container the fake
// driver's libraries and device nodes its NVIDIA_VISIBLE_DEVICES asks for,
// then runs runc with the same arguments.
package main

import (
	"os"
	"syscall"
	"time"

	"github.com/vgpushare/vshare/e2e/toolkit"
)

func main() {
	args := os.Args[1:]
	cwd, err := os.Getwd()
	if err != nil {
		fail(args, err)
	}
	cfg, err := toolkit.LoadConfig(os.DirFS("/"), toolkit.ConfigPath(os.Getenv))
	if err != nil {
		fail(args, err)
	}
	r := &toolkit.Runtime{Args: args, Config: cfg, Cwd: cwd}
	runtime, err := r.Prepare()
	if err != nil {
		fail(args, err)
	}
	err = syscall.Exec(runtime, append([]string{runtime}, args...), os.Environ())
	fail(args, err) // Exec returns only on failure
}

func fail(args []string, err error) {
	toolkit.ReportError(args, err, time.Now())
	os.Exit(1)
}
