//go:build e2e

// Command throughput runs the end-to-end scheduling benchmark (package
// e2e/throughput): the floor (our scheduler, pods with no device request),
// ours (vGPU pods) and Volcano v1.10.0's stock scheduler, each on a fresh
// cluster of the same shape. It prints a markdown table and writes
// e2e-burst.csv and e2e-burst.txt (command line, commit, date, machine,
// per-run details and request counts) to --out. `make bench-e2e` runs it.
package main

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/vgpushare/vshare/e2e/throughput"
)

func main() {
	o := throughput.Options{Log: os.Stderr}
	flag.IntVar(&o.Nodes, "nodes", 200, "simulated DGX A100 nodes, each with a node agent and a fake kubelet")
	flag.IntVar(&o.Jobs, "jobs", 100, "Volcano Jobs (gangs) in the burst")
	flag.IntVar(&o.PodsPerJob, "pods-per-job", 20, "pods per Job")
	flag.DurationVar(&o.Idle, "idle", time.Minute, "how long to count node PATCHes after the burst")
	flag.DurationVar(&o.Timeout, "timeout", 15*time.Minute, "longest wait for the burst (floor and ours)")
	stockTimeout := flag.Duration("stock-timeout", 4*time.Minute,
		"longest wait for the stock scheduler's burst (it stalls on throttled handshake PATCHes); how far it got is reported")
	which := flag.String("schedulers", "floor,ours,stock", "comma-separated, in run order: "+strings.Join(throughput.Schedulers, ", "))
	out := flag.String("out", "bench/results", "directory for <name>.csv and <name>.txt; empty writes no files")
	name := flag.String("name", "e2e-burst", "base name of the files written to --out")
	delays := flag.String("agent-delays", "0", "comma-separated delays added before every Allocate (a slower node agent); "+
		"ours and stock run once per delay, the floor (no Allocate) once")
	rounds := flag.Int("rounds", 1, "how many times to make the whole sequence of runs, one round after the other; "+
		"each run's ratio is to its own round's floor, and a summary gives the ratios over the rounds")
	flag.StringVar(&o.AltScheduler, "alt-scheduler", "", "for ours-alt: the absolute path of another build of our vc-scheduler "+
		"(another commit, or a change applied, as hack/bench-rules.sh builds)")
	altNote := flag.String("alt-note", "", "what the ours-alt build is, recorded in the header of the .txt")
	flag.Parse()
	var agentDelays []time.Duration
	for _, d := range strings.Split(*delays, ",") {
		v, err := time.ParseDuration(strings.TrimSpace(d))
		if err != nil || v < 0 {
			fail(2, "--agent-delays=%q: %q is not a duration of 0 or more", *delays, d)
		}
		agentDelays = append(agentDelays, v)
	}
	var runs []string
	for _, s := range strings.Split(*which, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		if !slices.Contains(throughput.Schedulers, s) {
			fail(2, "--schedulers=%q: %q is not one of %s", *which, s, strings.Join(throughput.Schedulers, ", "))
		}
		runs = append(runs, s)
	}
	switch {
	case len(runs) == 0:
		fail(2, "--schedulers=%q: name at least one of %s", *which, strings.Join(throughput.Schedulers, ", "))
	case o.Nodes < 1 || o.Jobs < 1 || o.PodsPerJob < 1:
		fail(2, "--nodes=%d --jobs=%d --pods-per-job=%d: each must be at least 1", o.Nodes, o.Jobs, o.PodsPerJob)
	case o.Timeout <= 0 || *stockTimeout <= 0:
		fail(2, "--timeout=%s --stock-timeout=%s: each must be positive", o.Timeout, *stockTimeout)
	case o.Idle < 0:
		fail(2, "--idle=%s: must not be negative", o.Idle)
	case *rounds < 1:
		fail(2, "--rounds=%d: must be at least 1", *rounds)
	case slices.Contains(runs, throughput.SchedulerOursAlt) && !filepath.IsAbs(o.AltScheduler):
		fail(2, "--alt-scheduler=%q: ours-alt needs the absolute path of a vc-scheduler executable", o.AltScheduler)
	case o.AltScheduler != "" && !slices.Contains(runs, throughput.SchedulerOursAlt):
		fail(2, "--alt-scheduler=%q: no ours-alt run in --schedulers=%q would use it", o.AltScheduler, *which)
	}
	if o.AltScheduler != "" {
		if st, err := os.Stat(o.AltScheduler); err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			fail(2, "--alt-scheduler=%q: not an executable file", o.AltScheduler)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var txt bytes.Buffer
	header(&txt)
	if o.AltScheduler != "" {
		fmt.Fprintf(&txt, "ours-alt: %s (%s)\n", o.AltScheduler, *altNote)
	}
	began := time.Now()
	var results []*throughput.Result
	for round := 1; round <= *rounds; round++ {
		for _, s := range runs {
			ds := agentDelays
			if s == throughput.SchedulerFloor {
				ds = ds[:1] // no Allocate: the delay changes nothing
			}
			for _, d := range ds {
				run := o
				run.Scheduler, run.AgentDelay, run.Round = s, d, round
				if s == throughput.SchedulerStock {
					run.Timeout = *stockTimeout
				}
				r, err := throughput.Run(ctx, run)
				if err != nil {
					fail(1, "throughput (round %d, %s, agent delay %s): %v", round, s, d, err)
				}
				results = append(results, r)
				throughput.Details(io.MultiWriter(os.Stdout, &txt), r)
			}
		}
	}
	fmt.Println()
	fmt.Fprintln(&txt)
	throughput.Report(io.MultiWriter(os.Stdout, &txt), results)
	throughput.Summary(io.MultiWriter(os.Stdout, &txt), results)
	fmt.Fprintf(&txt, "\nwhole command: %s\n", time.Since(began).Round(time.Second))
	if *out == "" {
		return
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		fail(1, "--out=%q: %v", *out, err)
	}
	var csv bytes.Buffer
	if err := throughput.WriteCSV(&csv, results); err != nil {
		fail(1, "write CSV: %v", err)
	}
	for name, data := range map[string][]byte{*name + ".csv": csv.Bytes(), *name + ".txt": txt.Bytes()} {
		path := filepath.Join(*out, name)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			fail(1, "--out=%q: %v", *out, err)
		}
		fmt.Fprintf(os.Stderr, "throughput: wrote %s\n", path)
	}
}

// header records what produced the figures: command line, commit, date and
// machine.
func header(w io.Writer) {
	fmt.Fprintf(w, "command: %s\n", strings.Join(os.Args, " "))
	if wd, err := os.Getwd(); err == nil {
		fmt.Fprintf(w, "directory: %s\n", wd)
	}
	commit := run("git", "rev-parse", "HEAD")
	if st := run("git", "status", "--porcelain", "--untracked-files=no"); st != "" {
		commit += " (with uncommitted changes)"
	}
	fmt.Fprintf(w, "commit: %s\n", commit)
	fmt.Fprintf(w, "date: %s\n", time.Now().UTC().Format(time.RFC3339))
	fmt.Fprintf(w, "go: %s\n", runtime.Version())
	fmt.Fprintf(w, "uname -a: %s\n", run("uname", "-a"))
	fmt.Fprintf(w, "nproc: %s\n", run("nproc"))
	fmt.Fprintf(w, "cpu: %s\n", cpuModel())
	fmt.Fprintf(w, "load average at start: %s\n", firstLine("/proc/loadavg"))
}

func run(name string, args ...string) string {
	b, err := exec.Command(name, args...).Output()
	if err != nil {
		return fmt.Sprintf("(%s: %v)", name, err)
	}
	return strings.TrimSpace(string(b))
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "(unknown)"
	}
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return "(unknown)"
}

func firstLine(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(unknown)"
	}
	return strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0])
}

func fail(code int, format string, args ...any) {
	fmt.Fprintf(os.Stderr, "throughput: "+format+"\n", args...)
	os.Exit(code)
}
