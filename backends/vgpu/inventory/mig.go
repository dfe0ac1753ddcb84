package inventory

import (
	"slices"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/config"
)

// MaxMIGPositions is the most instances one geometry may have: a card's
// positions in use are tracked in a 64-bit mask.
const MaxMIGPositions = 64

// Layout is the MIG catalogue of one card model, precomputed for fast
// matching. It is immutable and shared.
type Layout struct {
	// Groups are the model's geometries in catalogue order; a card's
	// geometry in use is an index into them.
	Groups []Group
}

// Group is one geometry: its instances in catalogue order, each owning
// the positions [Start, Start+Count).
type Group struct {
	Name      string
	Instances []Instance
	// bySize orders instance indices by memory, smallest first.
	bySize []int
}

// Instance is one instance type of a geometry.
type Instance struct {
	Name   string
	MemMiB int64
	Start  int
	Count  int
}

// LayoutFor returns the layout for a card type, matching the catalogue's
// model names as substrings of the type as upstream does, or nil when no
// usable geometry is known.
func LayoutFor(catalogue []config.AllowedMIGGeometries, typ string) *Layout {
	for _, entry := range catalogue {
		if !slices.ContainsFunc(entry.Models, func(m string) bool { return m != "" && strings.Contains(typ, m) }) {
			continue
		}
		l := &Layout{}
		for _, g := range entry.Geometries {
			mg := Group{Name: g.Group}
			pos := 0
			for _, t := range g.Instances {
				if t.Count <= 0 || t.Memory <= 0 {
					continue
				}
				mg.Instances = append(mg.Instances, Instance{Name: t.Name, MemMiB: int64(t.Memory), Start: pos, Count: int(t.Count)})
				pos += int(t.Count)
			}
			if pos == 0 || pos > MaxMIGPositions {
				continue
			}
			mg.bySize = make([]int, len(mg.Instances))
			for i := range mg.bySize {
				mg.bySize[i] = i
			}
			slices.SortStableFunc(mg.bySize, func(a, b int) int {
				return int(mg.Instances[a].MemMiB - mg.Instances[b].MemMiB)
			})
			l.Groups = append(l.Groups, mg)
		}
		if len(l.Groups) == 0 {
			return nil
		}
		return l
	}
	return nil
}

// Fit picks the smallest instance holding mem MiB: in the card's current
// geometry when it has one (used is its position mask), or, for an idle
// card, across every geometry it may switch to (ties go to the first
// geometry). ok is false when nothing fits; busy then tells whether some
// geometry could hold the request once the card is idle.
func (l *Layout) Fit(group int16, used uint64, mem int64) (g int16, pos int16, instMem int64, ok, busy bool) {
	if group >= 0 && used != 0 {
		mg := &l.Groups[group]
		for _, i := range mg.bySize {
			in := &mg.Instances[i]
			if in.MemMiB < mem {
				continue
			}
			for p := in.Start; p < in.Start+in.Count; p++ {
				if used&(1<<uint(p)) == 0 {
					return group, int16(p), in.MemMiB, true, false
				}
			}
		}
		_, _, _, could, _ := l.Fit(-1, 0, mem)
		return -1, -1, 0, false, could
	}
	best, bestPos, bestMem := -1, -1, int64(0)
	for gi := range l.Groups {
		mg := &l.Groups[gi]
		for _, i := range mg.bySize {
			in := &mg.Instances[i]
			if in.MemMiB < mem {
				continue
			}
			if best < 0 || in.MemMiB < bestMem {
				best, bestPos, bestMem = gi, in.Start, in.MemMiB
			}
			break
		}
	}
	if best < 0 {
		return -1, -1, 0, false, false
	}
	return int16(best), int16(bestPos), bestMem, true, false
}

// InstanceAt returns the memory of the instance at a position of a group.
func (l *Layout) InstanceAt(group, pos int) (int64, bool) {
	if group < 0 || group >= len(l.Groups) {
		return 0, false
	}
	for _, in := range l.Groups[group].Instances {
		if pos >= in.Start && pos < in.Start+in.Count {
			return in.MemMiB, true
		}
	}
	return 0, false
}

// GroupIndex returns the index of the named geometry, or -1.
func (l *Layout) GroupIndex(name string) int {
	for i := range l.Groups {
		if l.Groups[i].Name == name {
			return i
		}
	}
	return -1
}

// Describe renders the instances taken in the geometry (used is the
// card's position mask), in catalogue order: "mig all-1g: 1g.5gb x2 of 7
// instances".
func (g *Group) Describe(used uint64) string {
	var b strings.Builder
	b.WriteString("mig " + g.Name + ":")
	total := 0
	sep := " "
	for _, in := range g.Instances {
		total += in.Count
		n := 0
		for p := in.Start; p < in.Start+in.Count; p++ {
			if used&(1<<uint(p)) != 0 {
				n++
			}
		}
		if n > 0 {
			b.WriteString(sep + in.Name + " x" + strconv.Itoa(n))
			sep = ", "
		}
	}
	b.WriteString(" of " + strconv.Itoa(total) + " instances")
	return b.String()
}
