package quality

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Limit is what bounds a trace's policies from both sides, each averaged
// over the seeds the policies ran: Bound, the upper bound on any
// placement (MeanBound), and Offline, what offline placements that know
// the arrivals are found to reach (MeanOfflinePacking). The best offline
// placement lies between the two.
type Limit struct {
	Bound, Offline Bound
}

// BoundColumns are quality.csv's limit columns, appended after
// CSVColumns: bound100 and bound130, the trace's upper bound on any
// policy's allocated GPU % at 100% and 130% arrival, then offline100 and
// offline130, the offline packing's; the same on every row of a trace,
// empty when limits has none for the trace.
func BoundColumns(limits map[string]Limit) []Column {
	cell := func(r *Result, at func(Limit) float64) string {
		l, ok := limits[r.Trace]
		if !ok {
			return ""
		}
		return pct(at(l))
	}
	return []Column{
		{"bound100", func(r *Result) string { return cell(r, func(l Limit) float64 { return l.Bound.Alloc100 }) }},
		{"bound130", func(r *Result) string { return cell(r, func(l Limit) float64 { return l.Bound.Alloc130 }) }},
		{"offline100", func(r *Result) string { return cell(r, func(l Limit) float64 { return l.Offline.Alloc100 }) }},
		{"offline130", func(r *Result) string { return cell(r, func(l Limit) float64 { return l.Offline.Alloc130 }) }},
	}
}

// Closed is the share of base's distance to the bound that p closes:
// (p - base) / (bound - base), NaN when base is at the bound.
func Closed(p, base, bound float64) float64 {
	if bound-base <= 0 {
		return math.NaN()
	}
	return (p - base) / (bound - base)
}

// WriteBoundTable writes, per trace of results that limits covers, at
// 130% and 100% arrival: the bound, the offline packing, FGD's and
// fragment's allocation, and the share of FGD's distance to each of the
// two that fragment closes (negative: fragment is further from it than
// FGD). The offline packing is below the best offline placement, so the
// share of the distance to it is at least the share of the distance to
// that placement.
func WriteBoundTable(w io.Writer, results []*Result, limits map[string]Limit) error {
	var b strings.Builder
	b.WriteString("Allocated GPU % against the upper bound on any placement and against the offline packing " +
		"(docs/quality.md, \"The limit\"), mean over the seeds; \"closed\" is the share of FGD's distance to the bound " +
		"that fragment closes, \"closed offline\" the share of FGD's distance to the offline packing.\n\n")
	b.WriteString("| trace | set | bound 130 | offline 130 | fgd 130 | fragment 130 | closed 130 | closed offline 130 " +
		"| bound 100 | offline 100 | fgd 100 | fragment 100 | closed 100 | closed offline 100 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	// Means over the tuning traces: closed at 130 and 100 (where
	// defined), closed offline at 130 and 100 where the offline packing
	// is above fragment (else fragment is the best placement found and
	// the share says nothing), and the bound minus the offline packing.
	var m [6]mean
	for _, t := range traceOrder(results) {
		l, ok := limits[t]
		f, g := find(results, t, PolicyFragment), find(results, t, PolicyFGD)
		if !ok || f == nil || g == nil {
			continue
		}
		set := "held-out"
		if IsTuning(t) {
			set = "tuning"
		}
		c := [6]float64{
			Closed(f.Alloc130, g.Alloc130, l.Bound.Alloc130), Closed(f.Alloc100, g.Alloc100, l.Bound.Alloc100),
			Closed(f.Alloc130, g.Alloc130, l.Offline.Alloc130), Closed(f.Alloc100, g.Alloc100, l.Offline.Alloc100),
			l.Bound.Alloc130 - l.Offline.Alloc130, l.Bound.Alloc100 - l.Offline.Alloc100,
		}
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s | %.2f | %.2f | %.2f | %.2f | %s | %s |\n", t, set,
			l.Bound.Alloc130, l.Offline.Alloc130, g.Alloc130, f.Alloc130, share(c[0]), share(c[2]),
			l.Bound.Alloc100, l.Offline.Alloc100, g.Alloc100, f.Alloc100, share(c[1]), share(c[3]))
		if !IsTuning(t) {
			continue
		}
		above := [6]bool{true, true, l.Offline.Alloc130 > f.Alloc130, l.Offline.Alloc100 > f.Alloc100, true, true}
		for i := range m {
			if above[i] && !math.IsNaN(c[i]) {
				m[i].add(t, c[i])
			}
		}
	}
	if len(m[0].values) > 0 {
		fmt.Fprintf(&b, "\nOn the %d tuning traces fragment closes on average %s of FGD's distance to the bound at 130%% arrival and %s at 100%%. "+
			"Of FGD's distance to the offline packing, on the tuning traces where that packing is above fragment, it closes %s at 130%% (%s) and %s at 100%% (%s). "+
			"The offline packing is on average %.2f points below the bound at 130%% and %.2f at 100%%.\n",
			len(m[0].values), share(m[0].value()), share(m[1].value()), share(m[2].value()), m[2].list(), share(m[3].value()), m[3].list(),
			m[4].value(), m[5].value())
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write bound table: %w", err)
	}
	return nil
}

func share(v float64) string {
	if math.IsNaN(v) {
		return "n/a"
	}
	return fmt.Sprintf("%.0f%%", 100*v)
}

// mean collects values and the traces they came from.
type mean struct {
	values []float64
	traces []string
}

func (m *mean) add(trace string, v float64) {
	m.values = append(m.values, v)
	m.traces = append(m.traces, trace)
}

// value is their Mean, NaN when empty.
func (m *mean) value() float64 { return Mean(m.values) }

// list names the traces, "none" when empty.
func (m *mean) list() string {
	if len(m.traces) == 0 {
		return "none"
	}
	return strings.Join(m.traces, ", ")
}
