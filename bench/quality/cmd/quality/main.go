// Command quality runs the FGD placement-quality experiment (see package
// bench/quality and docs/quality.md) and prints CSV rows
// "trace,policy,seeds,alloc100,alloc130,unalloc130", or a markdown table.
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
	flag.StringVar(&o.Traces, "traces", "default", "comma-separated pod lists (default, gpushare100, ...), or \"all\" for the five of the paper's table")
	flag.StringVar(&o.Policies, "policies", "fragment,fgd,bestfit", "comma-separated policies, or \"all\"")
	flag.StringVar(&o.Seeds, "seeds", "42-51", "seeds: N, N-M or a comma-separated list")
	flag.IntVar(&o.Parallel, "parallel", 1, "trace x policy jobs run at once")
	flag.StringVar(&o.CSV, "csv", "", "also write the CSV rows to this file")
	flag.StringVar(&o.SVG, "svg", "", "also write allocation-vs-arrival plots, one SVG per trace, into this directory")
	flag.BoolVar(&o.Markdown, "markdown", false, "print a markdown table of unallocated GPU % at 130% arrival after the CSV")
	flag.Parse()
	if err := cli.Run(o, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "quality:", err)
		os.Exit(1)
	}
}
