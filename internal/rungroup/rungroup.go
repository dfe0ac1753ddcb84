// Package rungroup runs a process's long-lived parts together: the first
// part to fail cancels the others, and Wait returns that failure, named.
// The node agents (vgpu-device-plugin and the simulated Ascend agent) run
// their informers, registrar, device plugin and exporters in one, through
// nodeagent.Session.
package rungroup

import (
	"context"
	"fmt"
	"sync"
)

// Group runs parts until they all return.
type Group struct {
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
	cancel context.CancelFunc
}

// New returns a Group whose first failing part calls cancel.
func New(cancel context.CancelFunc) *Group { return &Group{cancel: cancel} }

// Start runs f in its own goroutine; its error, prefixed with name, stops
// the group if it is the first.
func (g *Group) Start(name string, f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.mu.Lock()
			if g.err == nil {
				g.err = fmt.Errorf("%s: %w", name, err)
			}
			g.mu.Unlock()
			g.cancel()
		}
	}()
}

// Wait waits for every part and returns the first failure, if any.
func (g *Group) Wait() error {
	g.wg.Wait()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.err
}
