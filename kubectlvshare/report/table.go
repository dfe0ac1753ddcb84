package report

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// newTable returns a tabwriter for one table.
func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 8, 2, ' ', 0) }

// row writes tab-separated cells.
func row(tw io.Writer, cells ...string) { fmt.Fprintln(tw, strings.Join(cells, "\t")) }

// Column names of the cards table; wide adds DEVICE and ID.
var (
	cardColumns     = []string{"NODE", "CARD", "MODEL", "MEMORY(MiB)", "CORES", "SHARES", "HEALTH", "CORDON", "LAYOUT", "PODS"}
	cardWideColumns = []string{"NODE", "DEVICE", "CARD", "ID", "MODEL", "MEMORY(MiB)", "CORES", "SHARES", "HEALTH", "CORDON", "LAYOUT", "PODS"}
)

// table renders the cards: one row per card (a run of idle cards alike
// folded into one row unless wide), a total row per node and device type,
// the totals of all listed nodes (when more than one), and unreadable annotations as error rows whose
// messages follow the table.
func (r *CardReport) table(w io.Writer, wide bool) error {
	if len(r.Nodes) == 0 {
		_, err := fmt.Fprintln(w, "No nodes found.")
		return err
	}
	tw := newTable(w)
	var n notes
	cols := cardColumns
	if wide {
		cols = cardWideColumns
	}
	row(tw, cols...)
	cells := func(node, device, card, id, model, mem, cores, shares, health, cordon, layout, pods string) {
		if wide {
			row(tw, node, device, card, id, model, mem, cores, shares, health, cordon, layout, pods)
		} else {
			row(tw, node, card, model, mem, cores, shares, health, cordon, layout, pods)
		}
	}
	for _, nc := range r.Nodes {
		cordon := "-"
		if nc.Cordoned {
			cordon = "yes"
		}
		for _, c := range foldIdle(nc.Cards, !wide) {
			cells(nc.Name, c.first.Device, c.label(), cardID(c), c.first.Model, ratio(c.first.MemoryUsedMiB, c.first.MemoryTotalMiB),
				ratio(c.first.CoresUsed, c.first.CoresTotal), fmt.Sprintf("%d/%d", c.first.Shares, c.first.MaxShares),
				health(c.first.Healthy), cardCordon(nc.Cordoned, c.first.Cordoned), dash(c.first.Layout), cardPods(c, wide))
		}
		for _, p := range nc.Errors {
			what := "registration"
			switch {
			case p.Pod != "":
				what = p.Pod
			case p.Setting:
				what = "cordon"
			}
			what += " " + n.ref(p.Message)
			state := "error"
			if p.Setting {
				state = "warning"
			}
			cells(nc.Name, p.Device, "-", "-", "-", "-", "-", "-", state, cordon, "-", what)
		}
		for _, t := range nc.Totals {
			cells(nc.Name, t.Device, "total", "-", totalsLabel(t, len(nc.Totals) > 1 && !wide), ratio(t.MemoryUsedMiB, t.MemoryTotalMiB),
				ratio(t.CoresUsed, t.CoresTotal), itoa(t.Shares), "", "", "", plural(t.Pods, "pod"))
		}
	}
	for _, t := range r.Totals {
		if len(r.Nodes) == 1 {
			break // the node's own total says it all
		}
		cells("all nodes", t.Device, "total", "-", totalsLabel(t, !wide), ratio(t.MemoryUsedMiB, t.MemoryTotalMiB),
			ratio(t.CoresUsed, t.CoresTotal), itoa(t.Shares), "", "", "", plural(t.Pods, "pod"))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return n.write(w)
}

// totalsLabel is a total row's MODEL cell: "8 cards, 6 idle", with the
// device type when the table does not show it otherwise.
func totalsLabel(t Totals, withDevice bool) string {
	s := plural(t.Cards, "card")
	if withDevice {
		s += " " + t.Device
	}
	return s + ", " + itoa(t.IdleCards) + " idle"
}

// cardCordon is a card row's CORDON cell: "yes" when the node is
// cordoned, "card" when only the card is (a node annotation), else "-".
func cardCordon(node, card bool) string {
	switch {
	case node:
		return "yes"
	case card:
		return "card"
	default:
		return "-"
	}
}

func health(ok bool) string {
	if ok {
		return "ok"
	}
	return "unhealthy"
}

// span is one card's row, or consecutive cards folded into one row: n of
// them, first to last, at indexes lo to hi.
type span[T any] struct {
	first, last T
	lo, hi, n   int
}

// label is the row's card column: "3", or "3-7" for a folded run.
func (s span[T]) label() string {
	if s.n == 1 {
		return itoa(s.lo)
	}
	return itoa(s.lo) + "-" + itoa(s.hi)
}

// fold groups consecutive cards (index(b) == index(a)+1) for which same
// holds; without on every card is its own row.
func fold[T any](items []T, on bool, index func(T) int, same func(a, b T) bool) []span[T] {
	var out []span[T]
	for _, it := range items {
		i := index(it)
		if on && len(out) > 0 {
			if l := &out[len(out)-1]; l.hi+1 == i && same(l.last, it) {
				l.last, l.hi = it, i
				l.n++
				continue
			}
		}
		out = append(out, span[T]{first: it, last: it, lo: i, hi: i, n: 1})
	}
	return out
}

// cardRun is a card, or a run of idle cards alike folded into one row.
type cardRun = span[Card]

func cardID(c cardRun) string {
	if c.n == 1 {
		return c.first.ID
	}
	return c.first.ID + ".." + c.last.ID
}

// pods renders the holders: names, with each one's share when wide.
func cardPods(c cardRun, wide bool) string {
	if c.n > 1 {
		return "(" + itoa(c.n) + " idle)"
	}
	if len(c.first.Pods) == 0 {
		return "-"
	}
	names := make([]string, len(c.first.Pods))
	for i, h := range c.first.Pods {
		names[i] = h.Namespace + "/" + h.Name
		if wide {
			names[i] += fmt.Sprintf("(%dMiB,%d)", h.MemoryMiB, h.Cores)
		}
	}
	return strings.Join(names, ",")
}

// foldIdle groups consecutive idle, healthy cards of one device type and
// model with the same capacity and layout; without on every card is its own
// run.
func foldIdle(cards []Card, on bool) []cardRun {
	return fold(cards, on, func(c Card) int { return c.Index }, alike)
}

// alike reports whether two cards are idle and healthy twins.
func alike(a, b Card) bool {
	return a.Idle() && b.Idle() && a.Healthy && b.Healthy && a.Cordoned == b.Cordoned && a.Device == b.Device && a.Model == b.Model &&
		a.MemoryTotalMiB == b.MemoryTotalMiB && a.CoresTotal == b.CoresTotal && a.MaxShares == b.MaxShares && a.Layout == b.Layout
}

// Column names of the pods table; wide adds DEVICE, ID, MODEL and MESSAGE.
var (
	podColumns     = []string{"NAMESPACE", "NAME", "STATUS", "NODE", "CARD", "MEMORY(MiB)", "CORES", "BIND-PHASE", "ADMITTED"}
	podWideColumns = []string{"NAMESPACE", "NAME", "STATUS", "NODE", "DEVICE", "CARD", "ID", "MODEL", "MEMORY(MiB)", "CORES",
		"BIND-PHASE", "ADMITTED", "MESSAGE"}
)

// table renders one row per card a pod holds (one row for a pod holding
// none), unreadable allocations as error cells whose messages follow.
func (r *PodReport) table(w io.Writer, wide bool) error {
	if len(r.Pods) == 0 {
		_, err := fmt.Fprintln(w, "No pods asking for shared devices found.")
		return err
	}
	tw := newTable(w)
	var n notes
	if wide {
		row(tw, podWideColumns...)
	} else {
		row(tw, podColumns...)
	}
	for _, p := range r.Pods {
		msg := p.Waiting
		if p.AdmissionMessage != "" {
			msg = p.AdmissionMessage
		}
		cells := func(device, card, id, model, mem, cores string) {
			if wide {
				row(tw, p.Namespace, p.Name, p.Phase, dash(p.Node), device, card, id, model, mem, cores, dash(p.BindPhase), dash(p.Admitted), dash(msg))
			} else {
				row(tw, p.Namespace, p.Name, p.Phase, dash(p.Node), card, mem, cores, dash(p.BindPhase), dash(p.Admitted))
			}
		}
		for _, c := range p.Cards {
			cells(c.Device, itoa(c.Index), c.ID, c.Model, i64(c.MemoryMiB), i64(c.Cores))
		}
		for _, e := range p.Errors {
			cells(e.Device, "error "+n.ref(e.Message), "-", "-", "-", "-")
		}
		if len(p.Cards) == 0 && len(p.Errors) == 0 {
			cells(strings.Join(p.Devices, ","), "-", "-", "-", "-", "-")
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return n.write(w)
}
