//go:build e2e

package framework

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Teardown is what a test binary's TestMain runs when it is interrupted.
type Teardown struct {
	mu sync.Mutex
	f  func()
}

// Set makes f the teardown (replacing any earlier one).
func (t *Teardown) Set(f func()) {
	t.mu.Lock()
	t.f = f
	t.mu.Unlock()
}

// OnSignal tears the harness down when the test binary gets SIGINT or
// SIGTERM (Ctrl-C, or go test's timeout): catching the signal would
// otherwise leave the tests running. It cancels the setup's context, runs
// the teardown set so far and exits with status 1. The returned function
// stops watching (defer it). What a run killed outright leaves behind, the
// next run's start sweeps (sweepStale for the real node).
func OnSignal(cancel context.CancelFunc) (*Teardown, func()) {
	t := &Teardown{}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s, ok := <-sig
		if !ok {
			return
		}
		fmt.Fprintf(os.Stderr, "e2e: %v: tearing down\n", s)
		cancel()
		t.mu.Lock()
		f := t.f
		t.mu.Unlock()
		if f != nil {
			f()
		}
		os.Exit(1)
	}()
	return t, func() { signal.Stop(sig) }
}
