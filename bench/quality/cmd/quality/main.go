// Command quality runs the FGD placement-quality experiment (see package
// bench/quality and docs/quality.md) and prints the CSV rows of
// bench/results/quality.csv ("trace,policy,seeds,alloc100,alloc130,
// unalloc130", then the seed spread and the tuning flag), and with
// --markdown the report.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/vgpushare/vshare/bench/quality/cli"
)

func main() {
	var o cli.Options
	flag.StringVar(&o.Dir, "trace-dir", "bench/testdata/openb", "directory of the openb CSV files (plain or .csv.gz)")
	flag.StringVar(&o.Traces, "traces", "default", "comma-separated pod lists (default, gpushare100, ...), \"all\" for the 24 openb pod lists, \"tuning\" for the five tuning traces (the paper's table) or \"held-out\" for the other 19")
	flag.StringVar(&o.Policies, "policies", "fragment,fgd,bestfit", "comma-separated policies, or \"all\"")
	flag.StringVar(&o.Seeds, "seeds", "42-51", "seeds: N, N-M or a comma-separated list")
	flag.IntVar(&o.Parallel, "parallel", 1, "trace x policy jobs run at once")
	flag.StringVar(&o.CSV, "csv", "", "also write the CSV rows to this file")
	flag.StringVar(&o.SVG, "svg", "", "also write plots into this directory: quality-traces.svg (the key policies across the traces) and allocation vs arrival, quality-<trace>.svg, for the traces --curves picks")
	flag.StringVar(&o.SeedCSV, "seeds-csv", "", "also write every seed's values (trace,policy,seed,alloc100,alloc130,unalloc130) to this file")
	flag.StringVar(&o.FromSeeds, "from-seeds", "", "run nothing: make the CSV, markdown and quality-traces.svg from this seed CSV (written by --seeds-csv)")
	flag.StringVar(&o.Curves, "curves", "tuning", "traces that get an allocation-vs-arrival plot under --svg: tuning, all or none")
	flag.BoolVar(&o.Markdown, "markdown", false, "print the markdown report after the CSV: the tuning traces against the paper, the per-trace tables at 130% and 100% arrival with the seed spread, and the computed summary lines")
	flag.StringVar(&o.MarkdownFile, "markdown-file", "", "also write the markdown report to this file")
	flag.BoolVar(&o.Bound, "bound", false, "also compute, for each trace, the upper bound on any placement and what offline placements that know the arrivals reach (about a minute per trace for ten seeds, several on the gpuspec traces; --parallel traces at once): bound100, bound130, offline100 and offline130 CSV columns and a markdown table of the distances to them")
	flag.Parse()
	if err := cli.Run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
}
