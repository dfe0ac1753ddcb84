package notify

import "sync"

// Signal broadcasts changes. The zero value is ready to use.
//
// A waiter first calls C, then reads the state it cares about, then waits on
// the channel: a change made after C was called closes that channel, so no
// change is lost.
type Signal struct {
	mu sync.Mutex
	ch chan struct{}
}

// C returns a channel closed by the next Broadcast.
func (s *Signal) C() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

// Broadcast wakes every waiter of the current channel.
func (s *Signal) Broadcast() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}
