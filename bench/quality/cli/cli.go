package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vgpushare/vshare/bench/quality"
)

// Options are the command's flags.
type Options struct {
	Dir, Traces, Policies, Seeds string
	Parallel                     int
	CSV, SVG                     string
	Markdown                     bool
	// SeedCSV, when set, receives every seed's values (WriteSeedCSV).
	SeedCSV string
	// MarkdownFile, when set, receives the markdown report too.
	MarkdownFile string
	// FromSeeds, when set, is a seed CSV (SeedCSV of an earlier run) to
	// make the outputs from instead of running anything.
	FromSeeds string
	// Curves picks the traces that get an allocation-vs-arrival plot
	// under SVG: "tuning" (the default), "all" or "none".
	Curves string
	// Bound adds the upper bound on any policy (quality.MeanBound over
	// the results' seeds, from the traces in Dir) and the offline
	// packing (quality.MeanOfflinePacking): the bound100, bound130,
	// offline100 and offline130 CSV columns and the markdown's distance
	// table. Traces are computed Parallel at once.
	Bound bool
}

// Run evaluates every trace x policy over the seeds and writes CSV rows to
// out as they finish (progress and timing go to log), then the sorted
// CSV, the markdown report and the plots as asked. With FromSeeds it
// runs nothing and makes the same outputs (but the curve plots) from a
// seed CSV an earlier run wrote.
func Run(o Options, out, log io.Writer) error {
	switch o.Curves {
	case "":
		o.Curves = "tuning"
	case "tuning", "all", "none":
	default:
		return fmt.Errorf("--curves %q: want tuning, all or none", o.Curves)
	}
	start := time.Now()
	var results []*quality.Result
	var err error
	if o.FromSeeds != "" {
		if results, err = readSeeds(o.FromSeeds); err != nil {
			return err
		}
		o.Curves = "none" // the seed CSV has no curves
	} else if results, err = evaluate(o, log, start); err != nil {
		return err
	}
	if len(results) == 0 {
		return fmt.Errorf("no results")
	}
	o.Seeds = quality.FormatSeeds(results[0].Seeds)
	cols := quality.CSVColumns()
	var bounds map[string]quality.Limit
	if o.Bound {
		if bounds, err = limitsOf(o.Dir, results, o.Parallel, log); err != nil {
			return err
		}
		cols = append(cols, quality.BoundColumns(bounds)...)
	}
	if err := quality.WriteCSVColumns(out, cols, results); err != nil {
		return err
	}
	if o.CSV != "" {
		if err := writeFile(o.CSV, func(w io.Writer) error { return quality.WriteCSVColumns(w, cols, results) }); err != nil {
			return err
		}
	}
	if o.SeedCSV != "" {
		if err := writeFile(o.SeedCSV, func(w io.Writer) error { return quality.WriteSeedCSV(w, results) }); err != nil {
			return err
		}
	}
	if o.Markdown {
		fmt.Fprintln(out)
		if err := writeMarkdown(out, o.Seeds, results, bounds); err != nil {
			return err
		}
	}
	if o.MarkdownFile != "" {
		if err := writeFile(o.MarkdownFile, func(w io.Writer) error { return writeMarkdown(w, o.Seeds, results, bounds) }); err != nil {
			return err
		}
	}
	if o.SVG != "" {
		if err := writePlots(o.SVG, o.Curves, results); err != nil {
			return err
		}
	}
	runs := 0
	for _, r := range results {
		runs += len(r.Seeds)
	}
	fmt.Fprintf(log, "quality: %d runs in %s\n", runs, time.Since(start).Round(time.Second))
	return nil
}

// evaluate runs the traces x policies x seeds of o, logging each result.
func evaluate(o Options, log io.Writer, start time.Time) ([]*quality.Result, error) {
	seeds, err := quality.ParseSeeds(o.Seeds)
	if err != nil {
		return nil, err
	}
	policies := split(o.Policies)
	if o.Policies == "all" {
		policies = append(append(append([]string(nil), quality.OurPolicies()...), quality.BuiltinPolicies()...), quality.ReferencePolicies()...)
	}
	traces := quality.TraceSet(o.Traces)
	if len(traces) == 0 {
		return nil, fmt.Errorf("--traces %q: want a comma-separated list of pod lists, \"all\" (the 24), \"tuning\" (the five) or \"held-out\" (the 19)", o.Traces)
	}
	var jobs []quality.Job
	for _, name := range traces {
		t, err := quality.LoadTrace(o.Dir, name)
		if err != nil {
			return nil, fmt.Errorf("load trace %s: %w", name, err)
		}
		for _, p := range policies {
			jobs = append(jobs, quality.Job{Trace: t, Policy: p})
		}
	}
	return quality.EvaluateAll(jobs, seeds, o.Parallel, func(r *quality.Result) {
		fmt.Fprintf(log, "%s\t(%s elapsed)\n", quality.CSVRow(r), time.Since(start).Round(time.Second))
	})
}

// readSeeds loads the results of a seed CSV (--from-seeds).
func readSeeds(path string) ([]*quality.Result, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("--from-seeds: %w", err)
	}
	defer f.Close()
	results, err := quality.ReadSeedCSV(f)
	if err != nil {
		return nil, fmt.Errorf("--from-seeds %s: %w", path, err)
	}
	return results, nil
}

// writeMarkdown writes the report: the published table's policies x
// tuning traces (with the paper's values), then the per-trace comparison
// (quality.WriteComparison).
func writeMarkdown(w io.Writer, seeds string, results []*quality.Result, bounds map[string]quality.Limit) error {
	var tuning []*quality.Result
	for _, r := range results {
		if quality.IsTuning(r.Trace) {
			tuning = append(tuning, r)
		}
	}
	if len(tuning) > 0 {
		if _, err := fmt.Fprintf(w, "Tuning traces: unallocated GPU %% at 130%% arrival, mean of seeds %s (lower is better):\n\n", seeds); err != nil {
			return fmt.Errorf("write markdown: %w", err)
		}
		if err := quality.WriteMarkdown(w, tuning); err != nil {
			return err
		}
		if _, err := fmt.Fprintln(w); err != nil {
			return fmt.Errorf("write markdown: %w", err)
		}
	}
	if err := quality.WriteComparison(w, results); err != nil {
		return err
	}
	if len(bounds) == 0 {
		return nil
	}
	if _, err := fmt.Fprintln(w); err != nil {
		return fmt.Errorf("write markdown: %w", err)
	}
	return quality.WriteBoundTable(w, results, bounds)
}

// limitsOf computes the upper bound and the offline packing of every
// trace of results over the seeds its results ran, parallel traces at
// once (at least one).
func limitsOf(dir string, results []*quality.Result, parallel int, log io.Writer) (map[string]quality.Limit, error) {
	var traces []*quality.Result
	seen := map[string]bool{}
	for _, r := range results {
		if !seen[r.Trace] {
			seen[r.Trace] = true
			traces = append(traces, r)
		}
	}
	out := make([]quality.Limit, len(traces))
	err := quality.ForEach(len(traces), parallel, func(i int) (err error) {
		out[i], err = limitOf(dir, traces[i])
		return err
	}, func(i int) {
		fmt.Fprintf(log, "limits of %s: bound %.2f / %.2f, offline packing %.2f / %.2f at 100%% / 130%%\n", traces[i].Trace,
			out[i].Bound.Alloc100, out[i].Bound.Alloc130, out[i].Offline.Alloc100, out[i].Offline.Alloc130)
	})
	if err != nil {
		return nil, err
	}
	m := map[string]quality.Limit{}
	for i, r := range traces {
		m[r.Trace] = out[i]
	}
	return m, nil
}

// limitOf is the limits of r's trace over r's seeds.
func limitOf(dir string, r *quality.Result) (quality.Limit, error) {
	t, err := quality.LoadTrace(dir, r.Trace)
	if err != nil {
		return quality.Limit{}, fmt.Errorf("bound: load trace %s: %w", r.Trace, err)
	}
	var l quality.Limit
	if l.Bound, err = quality.MeanBound(t, r.Seeds); err != nil {
		return quality.Limit{}, fmt.Errorf("bound: %w", err)
	}
	if l.Offline, err = quality.MeanOfflinePacking(t, r.Seeds); err != nil {
		return quality.Limit{}, fmt.Errorf("offline packing: %w", err)
	}
	return l, nil
}

// writePlots writes quality-traces.svg (the key policies across every
// trace of the run) and quality-<trace>.svg (allocation against arrival)
// for the traces curves selects.
func writePlots(dir, curves string, results []*quality.Result) error {
	byTrace := map[string][]*quality.Result{}
	var order []string
	for _, r := range results {
		if byTrace[r.Trace] == nil {
			order = append(order, r.Trace)
		}
		byTrace[r.Trace] = append(byTrace[r.Trace], r)
	}
	if err := writeFile(filepath.Join(dir, "quality-traces.svg"), func(w io.Writer) error { return quality.WriteComparisonSVG(w, results) }); err != nil {
		return err
	}
	for _, t := range order {
		if curves == "none" || curves == "tuning" && !quality.IsTuning(t) {
			continue
		}
		path := filepath.Join(dir, "quality-"+t+".svg")
		if err := writeFile(path, func(w io.Writer) error { return quality.WriteSVG(w, t, byTrace[t]) }); err != nil {
			return err
		}
	}
	return nil
}

func writeFile(path string, write func(io.Writer) error) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create %s: %w", filepath.Dir(path), err)
	}
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if err := write(f); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func split(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
