package quality

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// BoundColumns are quality.csv's bound columns, appended after
// CSVColumns: bound100 and bound130, the trace's upper bound on any
// policy's allocated GPU % at 100% and 130% arrival (MeanBound over the
// same seeds), the same on every row of a trace; empty when bounds has
// none for the trace.
func BoundColumns(bounds map[string]Bound) []Column {
	cell := func(r *Result, at func(Bound) float64) string {
		b, ok := bounds[r.Trace]
		if !ok {
			return ""
		}
		return pct(at(b))
	}
	return []Column{
		{"bound100", func(r *Result) string { return cell(r, func(b Bound) float64 { return b.Alloc100 }) }},
		{"bound130", func(r *Result) string { return cell(r, func(b Bound) float64 { return b.Alloc130 }) }},
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

// WriteBoundTable writes, per trace of results that bounds covers, the
// bound on the allocated GPU % at 130% and 100% arrival, fragment's and
// FGD's allocation and the share of FGD's distance to the bound fragment
// closes (negative: fragment is further from it than FGD).
func WriteBoundTable(w io.Writer, results []*Result, bounds map[string]Bound) error {
	var b strings.Builder
	b.WriteString("Allocated GPU % against the upper bound on any policy (docs/quality.md, \"The limit\"), mean over the seeds; " +
		"\"closed\" is the share of FGD's distance to the bound that fragment closes.\n\n")
	b.WriteString("| trace | set | bound 130 | fgd 130 | fragment 130 | closed 130 | bound 100 | fgd 100 | fragment 100 | closed 100 |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|\n")
	var sum130, sum100 float64
	n := 0
	for _, t := range traceOrder(results) {
		bd, ok := bounds[t]
		f, g := find(results, t, PolicyFragment), find(results, t, PolicyFGD)
		if !ok || f == nil || g == nil {
			continue
		}
		set := "held-out"
		if IsTuning(t) {
			set = "tuning"
		}
		c130, c100 := Closed(f.Alloc130, g.Alloc130, bd.Alloc130), Closed(f.Alloc100, g.Alloc100, bd.Alloc100)
		fmt.Fprintf(&b, "| %s | %s | %.2f | %.2f | %.2f | %s | %.2f | %.2f | %.2f | %s |\n", t, set,
			bd.Alloc130, g.Alloc130, f.Alloc130, share(c130), bd.Alloc100, g.Alloc100, f.Alloc100, share(c100))
		if IsTuning(t) && !math.IsNaN(c130) && !math.IsNaN(c100) {
			sum130, sum100 = sum130+c130, sum100+c100
			n++
		}
	}
	if n > 0 {
		fmt.Fprintf(&b, "\nOn the %d tuning traces fragment closes on average %s of FGD's distance to the bound at 130%% arrival and %s at 100%%.\n",
			n, share(sum130/float64(n)), share(sum100/float64(n)))
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
