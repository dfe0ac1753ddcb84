package quality

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// keyPolicies130 and keyPolicies100 are the columns of the two per-trace
// tables, in this order; a policy no result has is left out.
func keyPolicies130() []string {
	return []string{PolicyFragment, PolicyFGD, PolicyBuiltin, PolicyBinpack, PolicyBestFit}
}

func keyPolicies100() []string {
	return []string{PolicyFragment, PolicyBinpack, PolicyBuiltin, PolicyFGD}
}

// WriteComparison writes the per-trace section of the report: at 130%
// arrival, the unallocated GPU % of the key policies (mean ± 95% CI over
// the seeds) with fragment's paired margins against FGD and the built-in,
// and the summary lines; then the same at 100% arrival for the allocated
// GPU % against binpack and the built-in; last, every policy of results at
// 130%. Every sentence is computed from results.
func WriteComparison(w io.Writer, results []*Result) error {
	var b strings.Builder
	seeds := "the seeds"
	if len(results) > 0 {
		seeds = "seeds " + seedList(results[0].Seeds)
	}
	fmt.Fprintf(&b, "Unallocated GPU %% at 130%% arrival, mean ± 95%% CI half-width over %s (lower is better). "+
		"A margin is %s minus the other policy, paired by seed (negative: %s strands less); **bold**: its 95%% CI excludes 0, a difference larger than the seed spread.\n\n",
		seeds, PolicyFragment, PolicyFragment)
	writeTable(&b, results, keyPolicies130(), []string{PolicyFGD, PolicyBuiltin},
		func(r *Result) (float64, []float64) { return r.Unalloc130(), r.SeedUnalloc130() },
		func(c Comparison) Spread { return c.Margin130 })
	b.WriteString("\n")
	for _, against := range []string{PolicyFGD, PolicyBuiltin} {
		if cs := Compare(results, PolicyFragment, against); len(cs) > 0 {
			b.WriteString(SummaryLine(cs, PolicyFragment, against) + "\n\n")
		}
	}
	fmt.Fprintf(&b, "Allocated GPU %% at 100%% arrival, mean ± 95%% CI half-width over %s (higher is better); "+
		"a margin is %s minus the other policy, paired by seed (negative: %s allocates less); **bold**: its 95%% CI excludes 0.\n\n", seeds, PolicyFragment, PolicyFragment)
	writeTable(&b, results, keyPolicies100(), []string{PolicyBinpack, PolicyBuiltin},
		func(r *Result) (float64, []float64) { return r.Alloc100, r.SeedAlloc100 },
		func(c Comparison) Spread { return c.Margin100 })
	b.WriteString("\n")
	for _, against := range []string{PolicyBinpack, PolicyBuiltin} {
		if cs := Compare(results, PolicyFragment, against); len(cs) > 0 {
			b.WriteString(Worse100Line(cs, PolicyFragment, against) + "\n\n")
		}
	}
	var all []string
	for _, r := range results {
		if !contains(all, r.Policy) {
			all = append(all, r.Policy)
		}
	}
	fmt.Fprintf(&b, "Every policy: unallocated GPU %% at 130%% arrival, mean ± 95%% CI half-width over %s (lower is better).\n\n", seeds)
	writeTable(&b, results, all, nil,
		func(r *Result) (float64, []float64) { return r.Unalloc130(), r.SeedUnalloc130() }, nil)
	return writeString(w, "comparison", b.String())
}

// writeTable writes one row per trace: the trace, tuning or held-out,
// each present policy's values (values returns the mean and the seeds')
// as mean ± CI, and fragment's margin
// against each of against (margin picks the Spread; bold when its CI
// excludes 0).
func writeTable(b *strings.Builder, results []*Result, policies, against []string,
	values func(*Result) (float64, []float64), margin func(Comparison) Spread) {
	var cols []string
	for _, p := range policies {
		if hasPolicy(results, p) {
			cols = append(cols, p)
		}
	}
	var vs []string
	if hasPolicy(results, PolicyFragment) {
		for _, a := range against {
			if hasPolicy(results, a) {
				vs = append(vs, a)
			}
		}
	}
	b.WriteString("| trace | set |")
	for _, p := range cols {
		b.WriteString(" " + p + " |")
	}
	for _, a := range vs {
		b.WriteString(" " + PolicyFragment + " − " + a + " |")
	}
	b.WriteString("\n|---|---|" + strings.Repeat("---:|", len(cols)+len(vs)) + "\n")
	for _, t := range traceOrder(results) {
		set := "held-out"
		if IsTuning(t) {
			set = "tuning"
		}
		b.WriteString("| " + t + " | " + set + " |")
		for _, p := range cols {
			r := find(results, t, p)
			if r == nil {
				b.WriteString(" |")
				continue
			}
			// The mean is the result's own, as in the CSV.
			mean, seeds := values(r)
			s := SpreadOf(seeds)
			s.Mean = mean
			b.WriteString(" " + spreadCell(s) + " |")
		}
		for _, a := range vs {
			cs := Compare(results, PolicyFragment, a)
			cell := ""
			for _, c := range cs {
				if c.Trace == t {
					s := margin(c)
					if cell = spreadCell(s); s.Excludes0() {
						cell = "**" + cell + "**"
					}
				}
			}
			b.WriteString(" " + cell + " |")
		}
		b.WriteString("\n")
	}
}

// spreadCell renders "4.26 ± 0.05", or "4.26" when the CI is unknown (one
// seed).
func spreadCell(s Spread) string {
	if math.IsNaN(s.CI) {
		return pct(s.Mean)
	}
	return pct(s.Mean) + " ± " + pct(s.CI)
}

func hasPolicy(results []*Result, p string) bool {
	for _, r := range results {
		if r.Policy == p {
			return true
		}
	}
	return false
}
