// Command kubectl-vshare is the kubectl plugin `kubectl vshare`: installed
// on the PATH, `kubectl vshare cards|pods|fit|why` shows who holds which
// card, what is free, where a pod would fit and why a pod waits. See
// package kubectlvshare and docs/kubectl-vshare.md.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vgpushare/vshare/kubectlvshare"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := kubectlvshare.Run(ctx, os.Args[1:], kubectlvshare.Env{Stdout: os.Stdout, Stderr: os.Stderr})
	stop()
	os.Exit(code)
}
