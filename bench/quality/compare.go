package quality

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// Comparison is one policy against another on one trace, paired by seed:
// for every seed both ran, the difference policy − against of the value
// (both policies saw that seed's arrivals, so the difference removes what
// the seed does to both). Margin130 is the difference of the unallocated
// GPU % at 130% arrival (negative: policy strands less); Margin100 that of
// the allocated GPU % at 100% (negative: policy allocates less).
type Comparison struct {
	Trace, Policy, Against string
	Margin130, Margin100   Spread
}

// Below reports whether policy leaves less GPU unallocated at 130% than
// against: the mean margin, shown to two decimals, is negative.
func (c Comparison) Below() bool { return shownNegative(c.Margin130.Mean) }

// ClearlyBelow reports whether policy is below by more than the seed
// spread: below, and the 95% confidence interval of the paired margin
// excludes 0 (a paired t-test at the 5% level, two-sided).
func (c Comparison) ClearlyBelow() bool { return c.Below() && c.Margin130.Excludes0() }

// Worse100 reports whether policy allocates less than against at 100%
// arrival (mean margin, to two decimals, negative); ClearlyWorse100 when
// its 95% interval also excludes 0.
func (c Comparison) Worse100() bool        { return shownNegative(c.Margin100.Mean) }
func (c Comparison) ClearlyWorse100() bool { return c.Worse100() && c.Margin100.Excludes0() }

// shownNegative is true when v is negative as printed with two decimals.
func shownNegative(v float64) bool { return !math.IsNaN(v) && math.Round(v*100) < 0 }

// Compare pairs policy with against on every trace of results that has
// both, in the order the traces first appear.
func Compare(results []*Result, policy, against string) []Comparison {
	var out []Comparison
	for _, t := range traceOrder(results) {
		a, b := find(results, t, policy), find(results, t, against)
		if a == nil || b == nil {
			continue
		}
		out = append(out, Comparison{
			Trace: t, Policy: policy, Against: against,
			Margin130: SpreadOf(Paired(a, b, SeedUnalloc130Of)),
			Margin100: SpreadOf(Paired(a, b, SeedAlloc100Of)),
		})
	}
	return out
}

// Tally counts comparisons: how many, how many below, how many clearly
// below, and the traces not clearly below.
type Tally struct {
	N, Below, Clearly int
	NotClearly        []string
}

// TallyBelow counts the comparisons of the traces keep accepts.
func TallyBelow(cs []Comparison, keep func(trace string) bool) Tally {
	var t Tally
	for _, c := range cs {
		if !keep(c.Trace) {
			continue
		}
		t.N++
		if c.Below() {
			t.Below++
		}
		if c.ClearlyBelow() {
			t.Clearly++
		} else {
			t.NotClearly = append(t.NotClearly, c.Trace)
		}
	}
	return t
}

// SummaryLine is the computed sentence of the 24-trace table, e.g.
// "fragment below fgd on 24 of 24, by more than the seed spread on 22
// (not: gpushare100, cpu0); held-out: below on 19 of 19, by more than the
// seed spread on 18; tuning: below on 5 of 5, by more than the seed
// spread on 4."
func SummaryLine(cs []Comparison, policy, against string) string {
	all := TallyBelow(cs, func(string) bool { return true })
	if singleSeed(cs) {
		return fmt.Sprintf("%s below %s on %d of %d (one seed: no seed spread).", policy, against, all.Below, all.N)
	}
	held := TallyBelow(cs, func(t string) bool { return !IsTuning(t) })
	tun := TallyBelow(cs, IsTuning)
	s := fmt.Sprintf("%s below %s on %d of %d, by more than the seed spread on %d", policy, against, all.Below, all.N, all.Clearly)
	if len(all.NotClearly) > 0 && len(all.NotClearly) < all.N {
		s += " (not on " + strings.Join(all.NotClearly, ", ") + ")"
	}
	return s + fmt.Sprintf("; held-out: below on %d of %d, by more than the seed spread on %d; tuning: below on %d of %d, by more than the seed spread on %d.",
		held.Below, held.N, held.Clearly, tun.Below, tun.N, tun.Clearly)
}

// Worse100Line is the computed sentence on the 100% arrival point: the
// traces where policy allocates less than against.
func Worse100Line(cs []Comparison, policy, against string) string {
	var worse, clearly []string
	for _, c := range cs {
		if c.Worse100() {
			worse = append(worse, c.Trace)
		}
		if c.ClearlyWorse100() {
			clearly = append(clearly, c.Trace)
		}
	}
	s := fmt.Sprintf("At 100%% arrival %s allocates less than %s on %d of %d", policy, against, len(worse), len(cs))
	if len(worse) > 0 {
		s += " (" + strings.Join(worse, ", ") + ")"
	}
	s += fmt.Sprintf(", by more than the seed spread on %d", len(clearly))
	if len(clearly) > 0 {
		s += " (" + strings.Join(clearly, ", ") + ")"
	}
	return s + "."
}

// singleSeed reports whether no comparison has two seeds to measure a
// spread with.
func singleSeed(cs []Comparison) bool {
	for _, c := range cs {
		if c.Margin130.N >= 2 {
			return false
		}
	}
	return true
}

func traceOrder(results []*Result) []string {
	var out []string
	for _, r := range results {
		if !contains(out, r.Trace) {
			out = append(out, r.Trace)
		}
	}
	return out
}

func find(results []*Result, trace, policy string) *Result {
	for _, r := range results {
		if r.Trace == trace && r.Policy == policy {
			return r
		}
	}
	return nil
}

// writeString writes s, naming what failed.
func writeString(w io.Writer, what, s string) error {
	if _, err := io.WriteString(w, s); err != nil {
		return fmt.Errorf("write %s: %w", what, err)
	}
	return nil
}
