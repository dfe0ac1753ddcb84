package fakedriver

import (
	"fmt"
	"time"

	"k8s.io/utils/clock"

	"github.com/vgpushare/vshare/e2e/fakedriver/cards"
)

// Device describes one simulated GPU (cards.Device).
type Device = cards.Device

// NVLink is one active NVLink of a card (cards.NVLink).
type NVLink = cards.NVLink

// Card is one card as a client of the driver sees it (cards.Card).
type Card = cards.Card

// ListCards asks the driver listening on socketPath for its cards
// (cards.List).
func ListCards(socketPath string, timeout time.Duration) ([]Card, error) {
	return cards.List(socketPath, timeout)
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
	// DriverVersion is the kernel driver's version as
	// nvmlSystemGetDriverVersion reports it; "" means DefaultDriverVersion.
	DriverVersion string
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

// DefaultDriverVersion is the driver version reported when
// Config.DriverVersion is empty: an R550 driver, whose CUDA version (12.4)
// is the one the stub libcuda's cuDriverGetVersion reports.
const DefaultDriverVersion = "550.54.15"

// validate checks the configuration; errors name the field, the value and
// what is allowed.
func (c *Config) validate() error {
	if c.WaveNS == 0 {
		return fmt.Errorf("invalid config: WaveNS is 0, want > 0")
	}
	if c.DriverVersion != "" && !cards.PrintableWord(c.DriverVersion) {
		return fmt.Errorf("invalid config: DriverVersion %q: want printable ASCII without spaces", c.DriverVersion)
	}
	seen := make(map[string]int, len(c.Devices))
	for i, d := range c.Devices {
		if err := d.Validate(); err != nil {
			return fmt.Errorf("invalid config: Devices[%d]: %w", i, err)
		}
		if j, dup := seen[d.UUID]; dup {
			return fmt.Errorf("invalid config: Devices[%d].UUID %q repeats Devices[%d].UUID, want unique", i, d.UUID, j)
		}
		seen[d.UUID] = i
	}
	if _, err := cards.Resolve(c.Devices); err != nil {
		return fmt.Errorf("invalid config: %w", err)
	}
	return nil
}
