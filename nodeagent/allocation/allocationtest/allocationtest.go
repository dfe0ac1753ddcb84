// Package allocationtest holds what the node agents' Allocate tests share
// to play the informer's timing against a request: polling until the
// informer shows a change, and a gate that holds an agent's pod lookups
// after the request has marked what was pending.
package allocationtest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/tools/cache"
)

// WaitUntil polls cond for up to 5 s, in real time.
func WaitUntil(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Has reports whether an indexer holds the pod ns/name.
func Has(name string) func(cache.Indexer) bool {
	return func(idx cache.Indexer) bool { _, ok, _ := idx.GetByKey("ns/" + name); return ok }
}

// Gate lets an agent's first pod lookup through and holds the later ones
// until Open: the request has marked what was pending, and the test then
// has the informer deliver several changes before the agent looks again.
// The zero value is not usable; use NewGate, and Open it in a cleanup.
type Gate struct {
	calls atomic.Int32
	ch    chan struct{}
	once  sync.Once
}

// NewGate returns a closed gate that t opens when it ends.
func NewGate(t testing.TB) *Gate {
	g := &Gate{ch: make(chan struct{})}
	t.Cleanup(g.Open)
	return g
}

// Pass counts a lookup and, after the first, waits for Open.
func (g *Gate) Pass() {
	if g.calls.Add(1) > 1 {
		<-g.ch
	}
}

// Calls is the number of lookups so far.
func (g *Gate) Calls() int32 { return g.calls.Load() }

// Open lets every lookup through from now on.
func (g *Gate) Open() { g.once.Do(func() { close(g.ch) }) }
