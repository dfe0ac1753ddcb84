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
}

// Run evaluates every trace x policy over the seeds and writes CSV rows to
// out as they finish (progress and timing go to log), then the sorted
// CSV, the markdown table and the plots as asked.
func Run(o Options, out, log io.Writer) error {
	seeds, err := quality.ParseSeeds(o.Seeds)
	if err != nil {
		return err
	}
	policies := split(o.Policies)
	if o.Policies == "all" {
		policies = append(append(append([]string(nil), quality.OurPolicies()...), quality.BuiltinPolicies()...), quality.ReferencePolicies()...)
	}
	traces := split(o.Traces)
	if o.Traces == "all" {
		traces = quality.Traces()
	}
	var jobs []quality.Job
	for _, name := range traces {
		t, err := quality.LoadTrace(o.Dir, name)
		if err != nil {
			return fmt.Errorf("load trace %s: %w", name, err)
		}
		for _, p := range policies {
			jobs = append(jobs, quality.Job{Trace: t, Policy: p})
		}
	}
	start := time.Now()
	results, err := quality.EvaluateAll(jobs, seeds, o.Parallel, func(r *quality.Result) {
		fmt.Fprintf(log, "%s\t(%s elapsed)\n", quality.CSVRow(r), time.Since(start).Round(time.Second))
	})
	if err != nil {
		return err
	}
	if err := quality.WriteCSV(out, results); err != nil {
		return err
	}
	if o.CSV != "" {
		if err := writeFile(o.CSV, func(w io.Writer) error { return quality.WriteCSV(w, results) }); err != nil {
			return err
		}
	}
	if o.Markdown {
		fmt.Fprintf(out, "\nUnallocated GPU %% at 130%% arrival, mean of seeds %s (lower is better):\n\n", o.Seeds)
		if err := quality.WriteMarkdown(out, results); err != nil {
			return err
		}
	}
	if o.SVG != "" {
		if err := writePlots(o.SVG, results); err != nil {
			return err
		}
	}
	fmt.Fprintf(log, "quality: %d runs in %s\n", len(jobs)*len(seeds), time.Since(start).Round(time.Second))
	return nil
}

func writePlots(dir string, results []*quality.Result) error {
	byTrace := map[string][]*quality.Result{}
	var order []string
	for _, r := range results {
		if byTrace[r.Trace] == nil {
			order = append(order, r.Trace)
		}
		byTrace[r.Trace] = append(byTrace[r.Trace], r)
	}
	for _, t := range order {
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
