package vnpu

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
)

// DVPP says how a template uses the chip's digital vision pre-processing
// units.
type DVPP uint8

const (
	// DVPPShared shares the chip's DVPP in proportion to the AI cores (a
	// template name without a DVPP suffix).
	DVPPShared DVPP = iota
	// DVPPAll takes all of the chip's DVPP (templates ending in _dvpp).
	DVPPAll
	// DVPPNone uses no DVPP (templates ending in _ndvpp).
	DVPPNone
)

// String returns "shared", "all" or "none".
func (d DVPP) String() string {
	switch d {
	case DVPPAll:
		return "all"
	case DVPPNone:
		return "none"
	default:
		return "shared"
	}
}

// Resources are amounts of a chip's resources.
type Resources struct {
	// MemoryMiB is memory in MiB.
	MemoryMiB int64
	// AICore and AICPU are counts of AI cores and AI CPUs.
	AICore, AICPU int32
}

// Add returns r + o.
func (r Resources) Add(o Resources) Resources {
	return Resources{MemoryMiB: r.MemoryMiB + o.MemoryMiB, AICore: r.AICore + o.AICore, AICPU: r.AICPU + o.AICPU}
}

// Sub returns r - o.
func (r Resources) Sub(o Resources) Resources {
	return Resources{MemoryMiB: r.MemoryMiB - o.MemoryMiB, AICore: r.AICore - o.AICore, AICPU: r.AICPU - o.AICPU}
}

// Within reports whether every amount of r is at most the one of limit.
func (r Resources) Within(limit Resources) bool {
	return r.MemoryMiB <= limit.MemoryMiB && r.AICore <= limit.AICore && r.AICPU <= limit.AICPU
}

// Template is one virtual NPU shape.
type Template struct {
	// Name identifies the template, like "vir02" or "vir05_1c_16g". The
	// whole chip has the empty name.
	Name string
	// Resources are what one instance takes from its chip.
	Resources
	// DVPP is how the instance uses the chip's DVPP.
	DVPP DVPP
}

// Whole reports whether the template is the whole chip.
func (t Template) Whole() bool { return t.Name == "" }

// Chip is one chip model and its templates.
type Chip struct {
	// Name is the chip model, like "310P3" or "910B3".
	Name string
	// Total is the chip's sliceable resources (memory is the allocatable
	// memory).
	Total Resources
	// templates are sorted by memory, then AI cores, then AI CPUs, then name.
	templates []Template
}

// Errors returned by NewChip.
var (
	// ErrInvalidChip is returned for a chip without memory or AI cores.
	ErrInvalidChip = errors.New("invalid chip")
	// ErrInvalidTemplate is returned for a template that does not fit its chip.
	ErrInvalidTemplate = errors.New("invalid template")
)

// NewChip returns the chip with its template catalogue, rejecting a chip
// without memory or AI cores and templates that are unnamed, duplicated or
// larger than the chip.
func NewChip(name string, total Resources, templates []Template) (*Chip, error) {
	if total.MemoryMiB <= 0 || total.AICore <= 0 || total.AICPU < 0 {
		return nil, fmt.Errorf("chip %q: memory %d MiB, %d AI cores, %d AI CPUs: want memory and AI cores above 0: %w",
			name, total.MemoryMiB, total.AICore, total.AICPU, ErrInvalidChip)
	}
	c := &Chip{Name: name, Total: total, templates: slices.Clone(templates)}
	seen := make(map[string]bool, len(templates))
	for _, t := range c.templates {
		switch {
		case t.Name == "":
			return nil, fmt.Errorf("chip %q: a template has no name: %w", name, ErrInvalidTemplate)
		case seen[t.Name]:
			return nil, fmt.Errorf("chip %q: template %q defined twice: %w", name, t.Name, ErrInvalidTemplate)
		case t.MemoryMiB <= 0 || t.AICore < 0 || t.AICPU < 0 || !t.Resources.Within(total):
			return nil, fmt.Errorf("chip %q: template %q (%d MiB, %d AI cores, %d AI CPUs) does not fit the chip (%d MiB, %d, %d): %w",
				name, t.Name, t.MemoryMiB, t.AICore, t.AICPU, total.MemoryMiB, total.AICore, total.AICPU, ErrInvalidTemplate)
		}
		seen[t.Name] = true
	}
	slices.SortStableFunc(c.templates, func(a, b Template) int {
		switch {
		case a.MemoryMiB != b.MemoryMiB:
			return cmp.Compare(a.MemoryMiB, b.MemoryMiB)
		case a.AICore != b.AICore:
			return cmp.Compare(a.AICore, b.AICore)
		case a.AICPU != b.AICPU:
			return cmp.Compare(a.AICPU, b.AICPU)
		default:
			return cmp.Compare(a.Name, b.Name)
		}
	})
	return c, nil
}

// Templates returns the catalogue, smallest memory first. The slice is a copy.
func (c *Chip) Templates() []Template { return slices.Clone(c.templates) }

// Template returns the template called name; "" is the whole chip.
func (c *Chip) Template(name string) (Template, bool) {
	if name == "" {
		return c.WholeChip(), true
	}
	for _, t := range c.templates {
		if t.Name == name {
			return t, true
		}
	}
	return Template{}, false
}

// WholeChip is the template that takes the entire chip.
func (c *Chip) WholeChip() Template { return Template{Resources: c.Total, DVPP: DVPPAll} }

// RoundUp returns the smallest template whose memory holds memMiB (ties go
// to fewer AI cores, then fewer AI CPUs, then the name), or the whole chip
// when no template does but the chip's memory does. ok is false when even
// the whole chip is too small. This is HAMi's rule: a template-mode request
// is charged, and sliced, as the template it rounds up to.
func (c *Chip) RoundUp(memMiB int64) (t Template, ok bool) {
	for _, t := range c.templates {
		if memMiB <= t.MemoryMiB {
			return t, true
		}
	}
	if memMiB <= c.Total.MemoryMiB {
		return c.WholeChip(), true
	}
	return Template{}, false
}
