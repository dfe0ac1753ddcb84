package vgpu

import (
	"slices"
	"strings"

	"github.com/vgpushare/vshare/config"
)

// maxMIGPositions is the most instances one geometry may have: positions
// are tracked in a 64-bit mask.
const maxMIGPositions = 64

// migLayout is the MIG catalogue of one card model, precomputed for fast
// matching. It is immutable and shared.
type migLayout struct {
	groups []migGroup
}

// migGroup is one geometry: its instances in catalogue order, each owning
// the positions [start, start+count).
type migGroup struct {
	name      string
	instances []migInstance
	// bySize orders instance indices by memory, smallest first.
	bySize []int
}

type migInstance struct {
	name   string
	memMiB int64
	start  int
	count  int
}

// migLayoutFor returns the layout for a card type, matching the catalogue's
// model names as substrings of the type as upstream does, or nil when no
// usable geometry is known.
func migLayoutFor(catalogue []config.AllowedMIGGeometries, typ string) *migLayout {
	for _, entry := range catalogue {
		if !slices.ContainsFunc(entry.Models, func(m string) bool { return m != "" && strings.Contains(typ, m) }) {
			continue
		}
		l := &migLayout{}
		for _, g := range entry.Geometries {
			mg := migGroup{name: g.Group}
			pos := 0
			for _, t := range g.Instances {
				if t.Count <= 0 || t.Memory <= 0 {
					continue
				}
				mg.instances = append(mg.instances, migInstance{name: t.Name, memMiB: int64(t.Memory), start: pos, count: int(t.Count)})
				pos += int(t.Count)
			}
			if pos == 0 || pos > maxMIGPositions {
				continue
			}
			mg.bySize = make([]int, len(mg.instances))
			for i := range mg.bySize {
				mg.bySize[i] = i
			}
			slices.SortStableFunc(mg.bySize, func(a, b int) int {
				return int(mg.instances[a].memMiB - mg.instances[b].memMiB)
			})
			l.groups = append(l.groups, mg)
		}
		if len(l.groups) == 0 {
			return nil
		}
		return l
	}
	return nil
}

// fit picks the smallest instance holding mem MiB: in the card's current
// geometry when it has one (used is its position mask), or, for an idle
// card, across every geometry it may switch to (ties go to the first
// geometry). ok is false when nothing fits; busy then tells whether some
// geometry could hold the request once the card is idle.
func (l *migLayout) fit(group int16, used uint64, mem int64) (g int16, pos int16, instMem int64, ok, busy bool) {
	if group >= 0 && used != 0 {
		mg := &l.groups[group]
		for _, i := range mg.bySize {
			in := &mg.instances[i]
			if in.memMiB < mem {
				continue
			}
			for p := in.start; p < in.start+in.count; p++ {
				if used&(1<<uint(p)) == 0 {
					return group, int16(p), in.memMiB, true, false
				}
			}
		}
		_, _, _, could, _ := l.fit(-1, 0, mem)
		return -1, -1, 0, false, could
	}
	best, bestPos, bestMem := -1, -1, int64(0)
	for gi := range l.groups {
		mg := &l.groups[gi]
		for _, i := range mg.bySize {
			in := &mg.instances[i]
			if in.memMiB < mem {
				continue
			}
			if best < 0 || in.memMiB < bestMem {
				best, bestPos, bestMem = gi, in.start, in.memMiB
			}
			break
		}
	}
	if best < 0 {
		return -1, -1, 0, false, false
	}
	return int16(best), int16(bestPos), bestMem, true, false
}

// instanceAt returns the memory of the instance at a position of a group.
func (l *migLayout) instanceAt(group, pos int) (int64, bool) {
	if group < 0 || group >= len(l.groups) {
		return 0, false
	}
	for _, in := range l.groups[group].instances {
		if pos >= in.start && pos < in.start+in.count {
			return in.memMiB, true
		}
	}
	return 0, false
}

// groupIndex returns the index of the named geometry, or -1.
func (l *migLayout) groupIndex(name string) int {
	for i := range l.groups {
		if l.groups[i].name == name {
			return i
		}
	}
	return -1
}
