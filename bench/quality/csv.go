package quality

import (
	"encoding/csv"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Column is one CSV column: its header and its value for a result.
type Column struct {
	Name  string
	Value func(*Result) string
}

// CoreColumns are the six columns every consumer of quality.csv and
// cmd/tracesim relies on, in this order: trace, policy, seeds (as
// "42-51"), the mean allocated GPU % at 100% and 130% arrival and the
// mean unallocated GPU % at 130%, two decimals each.
func CoreColumns() []Column {
	return []Column{
		{"trace", func(r *Result) string { return r.Trace }},
		{"policy", func(r *Result) string { return r.Policy }},
		{"seeds", func(r *Result) string { return seedList(r.Seeds) }},
		{"alloc100", func(r *Result) string { return pct(r.Alloc100) }},
		{"alloc130", func(r *Result) string { return pct(r.Alloc130) }},
		{"unalloc130", func(r *Result) string { return pct(r.Unalloc130()) }},
	}
}

// CSVColumns are quality.csv's columns: CoreColumns, then the seed
// spread and the tuning flag, appended so that readers of the first six
// keep working:
//
//   - unalloc130_sd, unalloc130_ci95: the sample standard deviation over
//     the seeds of the unallocated GPU % at 130% arrival, and the
//     half-width of the 95% confidence interval of its mean (stats.go);
//   - alloc100_sd, alloc100_ci95: the same for the allocated GPU % at
//     100% arrival;
//   - tuning: "yes" for the five tuning traces (TuningTraces), "no" for
//     the 19 held out.
//
// The spread columns are empty for a single seed. Later columns (the
// upper bound's) are appended after tuning.
func CSVColumns() []Column {
	return append(CoreColumns(),
		Column{"unalloc130_sd", func(r *Result) string { return pctOrEmpty(SampleSD(r.SeedUnalloc130())) }},
		Column{"unalloc130_ci95", func(r *Result) string { return pctOrEmpty(CI95(r.SeedUnalloc130())) }},
		Column{"alloc100_sd", func(r *Result) string { return pctOrEmpty(SampleSD(r.SeedAlloc100)) }},
		Column{"alloc100_ci95", func(r *Result) string { return pctOrEmpty(CI95(r.SeedAlloc100)) }},
		Column{"tuning", func(r *Result) string { return yesNo(IsTuning(r.Trace)) }},
	)
}

// WriteCSVColumns writes the columns' header and one row per result.
func WriteCSVColumns(w io.Writer, cols []Column, results []*Result) error {
	names := make([]string, len(cols))
	for i, c := range cols {
		names[i] = c.Name
	}
	if _, err := fmt.Fprintln(w, strings.Join(names, ",")); err != nil {
		return fmt.Errorf("write CSV: %w", err)
	}
	for _, r := range results {
		if _, err := fmt.Fprintln(w, csvRow(cols, r)); err != nil {
			return fmt.Errorf("write CSV: %w", err)
		}
	}
	return nil
}

// WriteSeedCSV writes every seed's values, one row per result and seed:
// "trace,policy,seed,alloc100,alloc130,unalloc130". It is what the
// spread and the paired comparisons are computed from.
func WriteSeedCSV(w io.Writer, results []*Result) error {
	if _, err := fmt.Fprintln(w, "trace,policy,seed,alloc100,alloc130,unalloc130"); err != nil {
		return fmt.Errorf("write seed CSV: %w", err)
	}
	for _, r := range results {
		for i, s := range r.Seeds {
			if i >= len(r.SeedAlloc100) || i >= len(r.SeedAlloc130) {
				return fmt.Errorf("write seed CSV: %s/%s has no values for seed %d", r.Trace, r.Policy, s)
			}
			a100, a130 := r.SeedAlloc100[i], r.SeedAlloc130[i]
			if _, err := fmt.Fprintf(w, "%s,%s,%d,%s,%s,%s\n", r.Trace, r.Policy, s, pct(a100), pct(a130), pct(100-a130)); err != nil {
				return fmt.Errorf("write seed CSV: %w", err)
			}
		}
	}
	return nil
}

// FormatSeeds renders seeds as the seeds column does: "42-51" for a run
// of consecutive seeds, else space-separated.
func FormatSeeds(seeds []int64) string { return seedList(seeds) }

func csvRow(cols []Column, r *Result) string {
	vals := make([]string, len(cols))
	for i, c := range cols {
		vals[i] = c.Value(r)
	}
	return strings.Join(vals, ",")
}

func pct(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

func pctOrEmpty(v float64) string {
	if math.IsNaN(v) {
		return ""
	}
	return pct(v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// ReadSeedCSV reads what WriteSeedCSV wrote back into results, one per
// trace and policy in the order they first appear, their means computed
// as Evaluate computes them (so the report made from the file is the
// report of the run). The curves are not in the file: Curve is nil.
func ReadSeedCSV(r io.Reader) ([]*Result, error) {
	rows, err := csv.NewReader(r).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("read seed CSV: %w", err)
	}
	const header = "trace,policy,seed,alloc100,alloc130,unalloc130"
	if len(rows) == 0 || strings.Join(rows[0], ",") != header {
		return nil, fmt.Errorf("read seed CSV: want the header %q", header)
	}
	var out []*Result
	byKey := map[[2]string]*Result{}
	for i, row := range rows[1:] {
		line := i + 2
		if len(row) != 6 {
			return nil, fmt.Errorf("read seed CSV: line %d: %d fields, want 6 (%s)", line, len(row), header)
		}
		seed, err := strconv.ParseInt(row[2], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("read seed CSV: line %d: seed %q: want an integer", line, row[2])
		}
		var v [2]float64
		for j, f := range []string{"alloc100", "alloc130"} {
			if v[j], err = strconv.ParseFloat(row[3+j], 64); err != nil || math.IsNaN(v[j]) {
				return nil, fmt.Errorf("read seed CSV: line %d: %s %q: want a percentage", line, f, row[3+j])
			}
		}
		k := [2]string{row[0], row[1]}
		res := byKey[k]
		if res == nil {
			res = &Result{Trace: row[0], Policy: row[1]}
			byKey[k] = res
			out = append(out, res)
		}
		if contains64(res.Seeds, seed) {
			return nil, fmt.Errorf("read seed CSV: line %d: seed %d of %s/%s twice", line, seed, row[0], row[1])
		}
		res.Seeds = append(res.Seeds, seed)
		res.SeedAlloc100 = append(res.SeedAlloc100, v[0])
		res.SeedAlloc130 = append(res.SeedAlloc130, v[1])
	}
	for _, res := range out {
		n := float64(len(res.Seeds))
		for i := range res.Seeds {
			res.Alloc100 += res.SeedAlloc100[i] / n
			res.Alloc130 += res.SeedAlloc130[i] / n
		}
	}
	return out, nil
}

func contains64(list []int64, x int64) bool {
	for _, y := range list {
		if y == x {
			return true
		}
	}
	return false
}
