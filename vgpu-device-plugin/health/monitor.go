package health

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
)

// Defaults of MonitorOptions.
const (
	DefaultRecoveryAfter = 5 * time.Minute
	DefaultWaitTimeout   = 5 * time.Second
)

// watchedEvents are the event types that may make a card unhealthy.
const watchedEvents = nvml.EventTypeXidCriticalError | nvml.EventTypeDoubleBitEccError

// MonitorOptions configure a Monitor.
type MonitorOptions struct {
	// Lib is the initialised NVML library. Required.
	Lib nvml.Interface
	// UUIDs are the cards to watch. Required.
	UUIDs []string
	// Tracker receives the health changes. Required.
	Tracker *Tracker
	// Policy selects the checks; the zero value checks every Xid, use
	// DefaultPolicy or ParsePolicy.
	Policy Policy
	// Clock times recovery. Nil means the real clock.
	Clock clock.PassiveClock
	// RecoveryAfter is how long a card must stay free of critical events
	// before it is healthy again; 0 means DefaultRecoveryAfter, negative never.
	RecoveryAfter time.Duration
	// WaitTimeout bounds one NVML event wait, and so how late a stop or a
	// recovery is noticed; 0 means DefaultWaitTimeout.
	WaitTimeout time.Duration
}

// Monitor turns NVML events into card health.
type Monitor struct {
	opts      MonitorOptions
	lastEvent map[string]time.Time // unhealthy cards: last critical event
}

// NewMonitor validates the options and returns a Monitor.
func NewMonitor(opts MonitorOptions) (*Monitor, error) {
	if opts.Lib == nil || opts.Tracker == nil {
		return nil, errors.New("health monitor: Lib and Tracker are required")
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.RecoveryAfter == 0 {
		opts.RecoveryAfter = DefaultRecoveryAfter
	}
	if opts.WaitTimeout <= 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	return &Monitor{opts: opts, lastEvent: map[string]time.Time{}}, nil
}

// Run watches until ctx ends. It returns an error only when the event set
// cannot be created; cards that cannot register events are logged and
// watched by probing only.
func (m *Monitor) Run(ctx context.Context) error {
	if m.opts.Policy.Disabled {
		klog.InfoS("GPU health checks disabled", "env", EnvDisableHealthChecks)
		<-ctx.Done()
		return nil
	}
	set, ret := m.opts.Lib.EventSetCreate()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("create NVML event set: %w", ret)
	}
	defer set.Free()
	for _, uuid := range m.opts.UUIDs {
		if err := register(m.opts.Lib, set, uuid); err != nil {
			klog.ErrorS(err, "GPU health events unavailable; the card is watched by probing only", "uuid", uuid)
		}
	}
	timeoutMs := uint32(m.opts.WaitTimeout.Milliseconds())
	for ctx.Err() == nil {
		e, ret := set.Wait(timeoutMs)
		switch {
		case ret == nvml.SUCCESS:
			m.handle(e)
		case errors.Is(ret, nvml.ERROR_TIMEOUT):
		default:
			klog.ErrorS(ret, "Waiting for NVML events failed; marking every card unhealthy")
			for _, uuid := range m.opts.UUIDs {
				m.markUnhealthy(uuid, fmt.Sprintf("NVML event wait failed: %v", ret))
			}
		}
		m.recover()
	}
	return nil
}

// register subscribes the card to the watched events it supports.
func register(lib nvml.Interface, set nvml.EventSet, uuid string) error {
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return fmt.Errorf("get GPU %s: %w", uuid, ret)
	}
	supported, ret := dev.GetSupportedEventTypes()
	if ret != nvml.SUCCESS {
		return fmt.Errorf("supported events of %s: %w", uuid, ret)
	}
	if ret := dev.RegisterEvents(watchedEvents&supported, set); ret != nvml.SUCCESS {
		return fmt.Errorf("register events of %s: %w", uuid, ret)
	}
	return nil
}

// handle applies one event.
func (m *Monitor) handle(e nvml.EventData) {
	var reason string
	switch {
	case e.EventType&nvml.EventTypeXidCriticalError != 0:
		if !m.opts.Policy.critical(e.EventData) {
			klog.V(2).InfoS("Ignoring application Xid", "xid", e.EventData)
			return
		}
		reason = fmt.Sprintf("Xid %d", e.EventData)
	case e.EventType&nvml.EventTypeDoubleBitEccError != 0:
		reason = "double-bit ECC error"
	default:
		return
	}
	if e.Device == nil {
		for _, uuid := range m.opts.UUIDs {
			m.markUnhealthy(uuid, reason+" (no device in the event)")
		}
		return
	}
	uuid, ret := e.Device.GetUUID()
	if ret != nvml.SUCCESS {
		for _, u := range m.opts.UUIDs {
			m.markUnhealthy(u, fmt.Sprintf("%s on a card whose UUID cannot be read: %v", reason, ret))
		}
		return
	}
	m.markUnhealthy(uuid, reason)
}

func (m *Monitor) markUnhealthy(uuid, reason string) {
	m.lastEvent[uuid] = m.opts.Clock.Now()
	if m.opts.Tracker.SetUnhealthy(uuid, reason) {
		klog.InfoS("GPU unhealthy", "uuid", uuid, "reason", reason)
	}
}

// recover marks healthy the cards that were quiet long enough and answer NVML.
func (m *Monitor) recover() {
	if m.opts.RecoveryAfter < 0 {
		return
	}
	now := m.opts.Clock.Now()
	for uuid, last := range m.lastEvent {
		if now.Sub(last) < m.opts.RecoveryAfter {
			continue
		}
		if err := probe(m.opts.Lib, uuid); err != nil {
			klog.V(2).InfoS("GPU still failing its probe", "uuid", uuid, "err", err)
			continue
		}
		delete(m.lastEvent, uuid)
		if m.opts.Tracker.SetHealthy(uuid) {
			klog.InfoS("GPU healthy again", "uuid", uuid, "quietFor", now.Sub(last))
		}
	}
}

// probe checks that NVML still answers for the card.
func probe(lib nvml.Interface, uuid string) error {
	dev, ret := lib.DeviceGetHandleByUUID(uuid)
	if ret != nvml.SUCCESS {
		return ret
	}
	if _, ret := dev.GetMemoryInfo(); ret != nvml.SUCCESS {
		return ret
	}
	return nil
}
