package vnpu

// Slice is the set of template instances placed on one chip. The zero value
// is an empty chip. It is a value: copying it copies the state.
type Slice struct {
	// Used is the sum of the instances' resources.
	Used Resources
	// Instances is the number of instances.
	Instances int32
	// dvppAll and dvppShared count instances that take or share DVPP.
	dvppAll, dvppShared int32
}

// Conflict names why a template cannot join a chip's slice; NoConflict means
// it can.
type Conflict uint8

const (
	// NoConflict means the template fits.
	NoConflict Conflict = iota
	// ConflictWhole means the template is the whole chip and the chip is
	// not empty.
	ConflictWhole
	// ConflictMemory means the chip's free memory is too small.
	ConflictMemory
	// ConflictAICore means the chip's free AI cores are too few.
	ConflictAICore
	// ConflictAICPU means the chip's free AI CPUs are too few.
	ConflictAICPU
	// ConflictDVPP means the DVPP rule forbids the combination.
	ConflictDVPP
)

// String describes the conflict.
func (c Conflict) String() string {
	switch c {
	case NoConflict:
		return "fits"
	case ConflictWhole:
		return "a whole chip was asked of a chip already sliced"
	case ConflictMemory:
		return "not enough free memory on the chip"
	case ConflictAICore:
		return "not enough free AI cores on the chip"
	case ConflictAICPU:
		return "not enough free AI CPUs on the chip"
	default:
		return "DVPP use conflicts with the chip's other vNPUs"
	}
}

// Check reports whether t can join the slice on chip c: a whole chip needs
// an empty chip, the sums must stay within the chip's totals (checked in
// the order AI cores, AI CPUs, memory, which is the conflict reported), and
// the DVPP rule must hold (see the package documentation).
func (s Slice) Check(c *Chip, t Template) Conflict {
	if t.Whole() && s.Instances > 0 {
		return ConflictWhole
	}
	after := s.Used.Add(t.Resources)
	switch {
	case after.AICore > c.Total.AICore:
		return ConflictAICore
	case after.AICPU > c.Total.AICPU:
		return ConflictAICPU
	case after.MemoryMiB > c.Total.MemoryMiB:
		return ConflictMemory
	}
	switch t.DVPP {
	case DVPPAll:
		if s.dvppAll > 0 || s.dvppShared > 0 {
			return ConflictDVPP
		}
	case DVPPShared:
		if s.dvppAll > 0 {
			return ConflictDVPP
		}
	}
	return NoConflict
}

// Add returns the slice with t added. It does not check; call Check first.
func (s Slice) Add(t Template) Slice {
	s.Used = s.Used.Add(t.Resources)
	s.Instances++
	switch t.DVPP {
	case DVPPAll:
		s.dvppAll++
	case DVPPShared:
		s.dvppShared++
	}
	return s
}

// Remove returns the slice with t removed; it is the inverse of Add.
func (s Slice) Remove(t Template) Slice {
	s.Used = s.Used.Sub(t.Resources)
	s.Instances--
	switch t.DVPP {
	case DVPPAll:
		s.dvppAll--
	case DVPPShared:
		s.dvppShared--
	}
	return s
}

// Free returns what the chip has left.
func (s Slice) Free(c *Chip) Resources { return c.Total.Sub(s.Used) }
