package health

import (
	"maps"
	"sync"

	"github.com/vgpushare/vshare/internal/notify"
)

// Tracker holds the health of the cards. The zero value is not usable; call
// NewTracker. All methods are safe for concurrent use.
type Tracker struct {
	mu        sync.Mutex
	unhealthy map[string]string // UUID -> reason
	sig       notify.Signal
}

// NewTracker returns a Tracker with every card healthy.
func NewTracker() *Tracker {
	return &Tracker{unhealthy: map[string]string{}}
}

// SetUnhealthy marks the card unhealthy and reports whether that changed it.
func (t *Tracker) SetUnhealthy(uuid, reason string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, was := t.unhealthy[uuid]; was {
		t.unhealthy[uuid] = reason
		return false
	}
	t.unhealthy[uuid] = reason
	t.sig.Broadcast()
	return true
}

// SetHealthy marks the card healthy and reports whether that changed it.
func (t *Tracker) SetHealthy(uuid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, was := t.unhealthy[uuid]; !was {
		return false
	}
	delete(t.unhealthy, uuid)
	t.sig.Broadcast()
	return true
}

// Healthy reports whether the card is healthy.
func (t *Tracker) Healthy(uuid string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, bad := t.unhealthy[uuid]
	return !bad
}

// Unhealthy returns the unhealthy cards and why.
func (t *Tracker) Unhealthy() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return maps.Clone(t.unhealthy)
}

// Changed returns a channel closed at the next health change. Call it before
// reading the state to miss nothing.
func (t *Tracker) Changed() <-chan struct{} {
	return t.sig.C()
}
