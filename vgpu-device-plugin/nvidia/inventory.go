package nvidia

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/vgpushare/vshare/config"
)

// MemoryUnit says how memory is written in the registration and allocation
// annotations.
type MemoryUnit string

const (
	// UnitMiB writes MiB everywhere: this project's wire contract, and the
	// only unit upstream and this project agree on when gpuMemoryFactor is 1.
	UnitMiB MemoryUnit = "mib"
	// UnitFactor writes multiples of nvidia.gpuMemoryFactor, as
	// volcano-vgpu-device-plugin does (devmem = MiB / factor in the
	// registration; an allocation of n means n*factor MiB).
	UnitFactor MemoryUnit = "factor"
)

// ParseMemoryUnit validates a --memory-unit value.
func ParseMemoryUnit(s string) (MemoryUnit, error) {
	switch u := MemoryUnit(s); u {
	case UnitMiB, UnitFactor:
		return u, nil
	}
	return "", fmt.Errorf("memory unit %q: want %q or %q", s, UnitMiB, UnitFactor)
}

// DeviceTypePrefix starts every card type, as upstream registers it.
const DeviceTypePrefix = "NVIDIA-"

// fullCores is a whole card's SMs in percent.
const fullCores = 100

// Card is one GPU as the node registers it: the hardware facts with the
// device configuration applied.
type Card struct {
	GPU
	// Type is DeviceTypePrefix plus the product name.
	Type string
	// Count is how many containers may share the card (deviceSplitCount).
	Count int32
	// MemoryMiB is the memory the card is shared out by: the physical (or
	// preconfigured) memory times deviceMemoryScaling. Above the physical
	// memory when memory is over-committed.
	MemoryMiB int64
	// Cores is the card's SMs in percent times deviceCoreScaling.
	Cores int32
	// Mode is the card's operating mode: hami-core, mig or mps.
	Mode string
}

// Inventory is the node's registered cards under one configuration. It is
// immutable once built; a configuration change builds a new one.
type Inventory struct {
	// Node is the node name the settings were resolved for.
	Node string
	// Settings are the node's effective settings.
	Settings config.NodeSettings
	// NVIDIA is the nvidia: section the inventory was built from.
	NVIDIA config.NVIDIAConfig
	// Unit is how memory is written in the annotations.
	Unit MemoryUnit
	// Cards are the registered cards in NVML index order.
	Cards []Card
	// Filtered are the UUIDs hidden by the node's filterdevices.
	Filtered []string

	byUUID map[string]int
}

// NewInventory applies the configuration to the discovered GPUs for node.
func NewInventory(node string, gpus []GPU, cfg *config.Config, unit MemoryUnit) *Inventory {
	s := cfg.ForNode(node)
	inv := &Inventory{
		Node:     node,
		Settings: s,
		NVIDIA:   cfg.NVIDIA,
		Unit:     unit,
		byUUID:   make(map[string]int, len(gpus)),
	}
	for _, g := range gpus {
		if slices.Contains(s.FilterDevices.UUID, g.UUID) || slices.Contains(s.FilterDevices.Index, int32(g.Index)) {
			inv.Filtered = append(inv.Filtered, g.UUID)
			continue
		}
		phys := g.MemoryMiB
		if s.PreConfiguredDeviceMemory > 0 {
			phys = s.PreConfiguredDeviceMemory
		}
		c := Card{
			GPU:       g,
			Type:      DeviceTypePrefix + sanitizeType(g.Name),
			Count:     s.DeviceSplitCount,
			MemoryMiB: int64(math.Floor(float64(phys) * s.DeviceMemoryScaling)),
			Cores:     int32(math.Floor(fullCores * s.DeviceCoreScaling)),
			Mode:      s.OperatingMode,
		}
		if c.Mode == config.OperatingModeMIG && !g.MIGCapable {
			c.Mode = config.OperatingModeHAMiCore
		}
		inv.byUUID[g.UUID] = len(inv.Cards)
		inv.Cards = append(inv.Cards, c)
	}
	return inv
}

// Card returns the registered card with the UUID.
func (inv *Inventory) Card(uuid string) (Card, bool) {
	i, ok := inv.byUUID[uuid]
	if !ok {
		return Card{}, false
	}
	return inv.Cards[i], true
}

// factor is gpuMemoryFactor as a divisor (never below 1).
func (inv *Inventory) factor() int64 {
	return max(int64(inv.NVIDIA.GPUMemoryFactor), 1)
}

// ToUnit converts MiB to the annotations' memory unit (rounding down).
func (inv *Inventory) ToUnit(mib int64) int64 {
	if inv.Unit == UnitFactor {
		return mib / inv.factor()
	}
	return mib
}

// ToMiB converts an annotation's memory value to MiB.
func (inv *Inventory) ToMiB(v int64) int64 {
	if inv.Unit == UnitFactor {
		return v * inv.factor()
	}
	return v
}

// OverCommitted reports whether memory scaling promises more than the cards have.
func (inv *Inventory) OverCommitted() bool {
	return inv.Settings.DeviceMemoryScaling > 1
}

// Whole reports whether memMiB and cores of the card are all of it: all its
// physical memory, on a node that does not over-commit memory, with no SM
// limit asked (cores 0, which libvgpu does not limit, or 100 % or more).
// With all of a card's memory taken no other vGPU share fits on it (every
// share has memory), so the holder has the card to itself. A preconfigured
// memory below the physical one or a memory scaling above 1 make no share
// whole: the holder was given less than the card, or promised more than it
// has, and libvgpu must hold it to that; cores between 1 and 99 are a
// limit the holder asked for.
func (inv *Inventory) Whole(uuid string, memMiB int64, cores int32) bool {
	c, ok := inv.Card(uuid)
	return ok && !inv.OverCommitted() && c.MemoryMiB >= c.GPU.MemoryMiB &&
		memMiB >= c.GPU.MemoryMiB && (cores == 0 || cores >= fullCores)
}

// sanitizeType keeps the annotation separators out of a card type.
func sanitizeType(name string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case ',', ':', ';':
			return '-'
		}
		return r
	}, name)
}
