// Command pause is the pod sandbox process of the end-to-end tests' pause
// image (package images): it holds the pod's namespaces and does nothing
// else. It keeps what registry.k8s.io/pause (kubernetes
// build/pause/linux/pause.c) does that the kubelet and users rely on:
//
//   - SIGINT or SIGTERM ends it with status 0 (pause.c's sigdown), so
//     stopping a sandbox is a clean exit;
//   - on SIGCHLD it reaps every exited child without blocking (sigreap):
//     as the pid 1 of a pod sharing its PID namespace
//     (shareProcessNamespace), orphans of the pod's containers become its
//     children and must not stay zombies;
//   - a warning on stderr when it is not pid 1, as pause.c prints.
//
// Left out: `-v` (pause.c prints its version) and the C: a static Go
// binary builds reproducibly with the rest of the images.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	// A child that exited before Notify sent its SIGCHLD to nobody.
	reap()
	// After Notify: from here on a SIGTERM is a clean exit (the tests wait
	// for this line before signalling).
	if os.Getpid() != 1 {
		fmt.Fprintln(os.Stderr, "Warning: pause should be the first process")
	}
	for sig := range sigs {
		if sig == syscall.SIGCHLD {
			reap()
			continue
		}
		fmt.Fprintf(os.Stderr, "Shutting down, got signal: %v\n", sig)
		os.Exit(0)
	}
}

// reap collects every exited child: one SIGCHLD may stand for several.
func reap() {
	for {
		var ws syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
		if err == syscall.EINTR {
			continue
		}
		if pid <= 0 || err != nil {
			return
		}
	}
}
