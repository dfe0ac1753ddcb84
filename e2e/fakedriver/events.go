package fakedriver

import (
	"fmt"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/e2e/fakedriver/cards"
)

// maxQueuedEvents bounds the events an event set holds for a client that
// does not wait for them; older ones are dropped first.
const maxQueuedEvents = 1024

// event is one NVML event: the device it occurred on, its type and data
// (nvmlEventData_t: the Xid for nvmlEventTypeXidCriticalError).
type event struct {
	dev       int
	typ, data uint64
}

// eventHub holds the event sets of all connections, so that an event
// raised on a device reaches every set registered for it.
//
// Locking: mu guards every set's registrations and queue.
type eventHub struct {
	mu   sync.Mutex
	sets map[*eventSet]struct{}
}

// eventSet is one connection's NVML event set (nvmlEventSetCreate): the
// event types it records per device and the events recorded and not yet
// delivered. An NVML event set is its own open of the control device;
// here it is its own connection, so that a client blocked in EVWAIT holds
// up none of its process's other requests.
type eventSet struct {
	types map[int]uint64 // by device: the registered event types
	queue []event
	wake  chan struct{} // closed (and replaced) when an event is queued
}

func newEventHub() *eventHub {
	return &eventHub{sets: make(map[*eventSet]struct{})}
}

// register records typ on device d in set es, creating es (nil) on the
// connection's first registration; it returns the set.
func (h *eventHub) register(es *eventSet, d int, typ uint64) *eventSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	if es == nil {
		es = &eventSet{types: make(map[int]uint64), wake: make(chan struct{})}
		h.sets[es] = struct{}{}
	}
	es.types[d] |= typ
	return es
}

// drop forgets set es (its connection ended: nvmlEventSetFree).
func (h *eventHub) drop(es *eventSet) {
	if es == nil {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.sets, es)
}

// raise queues an event on every set registered for its type on its
// device and returns how many sets got it. Events raised before a set
// registered are not recorded (nvmlDeviceRegisterEvents: "All events that
// occurred before this call are not recorded").
func (h *eventHub) raise(e event) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for es := range h.sets {
		if es.types[e.dev]&e.typ == 0 {
			continue
		}
		if len(es.queue) == maxQueuedEvents {
			es.queue = es.queue[1:]
		}
		es.queue = append(es.queue, e)
		close(es.wake)
		es.wake = make(chan struct{})
		n++
	}
	return n
}

// wait returns the oldest event of es, waiting up to timeout for one
// (nvmlEventSetWait_v2: at once when one is ready, otherwise "sleeps till
// event arrives but not longer than specified timeout"); false when none
// came, or the connection went away meanwhile.
func (h *eventHub) wait(es *eventSet, timeout time.Duration, clk clock.Clock, gone <-chan struct{}) (event, bool) {
	var timer clock.Timer
	for {
		h.mu.Lock()
		if es != nil && len(es.queue) > 0 {
			e := es.queue[0]
			es.queue = es.queue[1:]
			h.mu.Unlock()
			if timer != nil {
				timer.Stop()
			}
			return e, true
		}
		var wake chan struct{}
		if es != nil {
			wake = es.wake
		}
		h.mu.Unlock()
		if timer == nil {
			timer = clk.NewTimer(timeout)
			defer timer.Stop()
		}
		select {
		case <-wake: // nil (no registration yet) blocks forever: only the timeout ends it
		case <-timer.C():
			return event{}, false
		case <-gone:
			return event{}, false
		}
	}
}

// InjectXid raises an Xid error on device d, as the kernel driver reports
// one (nvmlEventTypeXidCriticalError with the Xid as the event data; Xid
// 79: fallen off the bus, 48: double-bit ECC error, 31: MMU fault). Every
// event set registered for Xid events on the device records it; the
// answer is how many did (0 before any registered). The device keeps
// working: the fake models the event, not its consequences.
func (dr *Driver) InjectXid(d int, xid uint64) (int, error) {
	if !dr.validDevice(d) {
		return 0, fmt.Errorf("inject Xid %d: device %d: want 0..%d", xid, d, len(dr.st.devs)-1)
	}
	n := dr.events.raise(event{dev: d, typ: cards.EventXidCritical, data: xid})
	return n, nil
}
