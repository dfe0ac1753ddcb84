package rungroup

import (
	"context"
	"errors"
	"testing"
)

// The first failure cancels the other parts and is what Wait returns, with
// the part's name; parts that end cleanly add nothing.
func TestFirstFailureStopsTheGroup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	g := New(cancel)
	boom := errors.New("boom")
	g.Start("clean", func() error { return nil })
	g.Start("waiter", func() error { <-ctx.Done(); return errors.New("stopped after the failure") })
	failed := make(chan struct{})
	g.Start("failing", func() error { defer close(failed); return boom })
	err := g.Wait()
	if !errors.Is(err, boom) || err.Error() != "failing: boom" {
		t.Fatalf("Wait() = %v, want the first failure named by its part", err)
	}
	if ctx.Err() == nil {
		t.Error("the failure did not cancel the group's context")
	}
}

func TestAllCleanReturnsNil(t *testing.T) {
	g := New(func() {})
	g.Start("a", func() error { return nil })
	if err := g.Wait(); err != nil {
		t.Fatalf("Wait() = %v, want nil", err)
	}
}
