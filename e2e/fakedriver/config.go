package fakedriver

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/utils/clock"
)

// Device describes one simulated GPU, as DEV reports it.
type Device struct {
	// UUID is the device's identifier ("GPU-..."); no spaces.
	UUID string
	// TotalBytes is the device memory; ALLOC fails with OOM beyond it.
	TotalBytes uint64
	// SMs is the streaming multiprocessor count.
	SMs int
	// Name is the marketing name; no spaces (use "NVIDIA-A100-SXM4-40GB").
	Name string
}

// Config configures a Driver.
type Config struct {
	// Devices are the GPUs, in NVML/PCI order (DEV 0 is Devices[0]).
	Devices []Device
	// WaveNS is how long one full wave of blocks takes on any device, in
	// nanoseconds; HELLO reports it and clients size their work with it.
	WaveNS uint64
	// Clock drives the scheduler tick and stamps utilisation samples. nil
	// means the real clock. A fake clock (k8s.io/utils/clock/testing) makes
	// the execution model step only when the test steps the clock.
	Clock clock.WithTicker
	// GroupOf, if set, is asked once for the group of each pid when it first
	// connects (for example the container it runs in, from
	// /proc/<pid>/cgroup). Returning "" leaves the pid in no group. A group's
	// memory is tracked from the pid's first request on, so unlike SetGroup
	// no allocation can be missed.
	GroupOf func(pid int) string
}

// Timing of the execution model (PROTOCOL.md, "Execution model").
const (
	// tick is the scheduler quantum: each device hands out this much
	// whole-device time per tick.
	tick = time.Millisecond
	// samplePeriod is the utilisation sample period.
	samplePeriod = 100 * time.Millisecond
	// keptPeriods is how many sample periods PUTIL can look back over.
	keptPeriods = 64
	// pushBuffer is how much queued work a process may have on a device
	// before LAUNCH is held back.
	pushBuffer = 4 * time.Millisecond
)

// validate checks the configuration; errors name the field, the value and
// what is allowed.
func (c *Config) validate() error {
	if c.WaveNS == 0 {
		return fmt.Errorf("invalid config: WaveNS is 0, want > 0")
	}
	seen := make(map[string]int, len(c.Devices))
	for i, d := range c.Devices {
		if err := d.validate(); err != nil {
			return fmt.Errorf("invalid config: Devices[%d]: %w", i, err)
		}
		if j, dup := seen[d.UUID]; dup {
			return fmt.Errorf("invalid config: Devices[%d].UUID %q repeats Devices[%d].UUID, want unique", i, d.UUID, j)
		}
		seen[d.UUID] = i
	}
	return nil
}

// validate checks one device description.
func (d *Device) validate() error {
	if d.UUID == "" || strings.ContainsAny(d.UUID, " \t\r\n") {
		return fmt.Errorf("UUID %q: want non-empty, without white space", d.UUID)
	}
	if d.Name == "" || strings.ContainsAny(d.Name, " \t\r\n") {
		return fmt.Errorf("name %q: want non-empty, without white space", d.Name)
	}
	if d.TotalBytes == 0 {
		return fmt.Errorf("TotalBytes is 0, want > 0")
	}
	if d.SMs <= 0 {
		return fmt.Errorf("SMs is %d, want > 0", d.SMs)
	}
	return nil
}
