package quality

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
)

// Published returns the FGD paper's unallocated GPU % at 130% arrival
// (mean of seeds 42..51) of a reference policy on a trace, and whether
// the paper has it.
func Published(trace, policy string) (float64, bool) {
	row := func(fgd, bestFit, packing, clustering, dotProd, random float64) map[string]float64 {
		return map[string]float64{PolicyFGD: fgd, PolicyBestFit: bestFit, PolicyGpuPacking: packing,
			PolicyGpuClustering: clustering, PolicyDotProd: dotProd, PolicyRandom: random}
	}
	var m map[string]float64
	switch trace {
	case "default":
		m = row(4.61, 6.92, 8.00, 8.12, 9.15, 12.53)
	case "gpushare100":
		m = row(13.10, 14.99, 17.43, 17.35, 17.58, 20.56)
	case "multigpu50":
		m = row(2.82, 4.26, 3.82, 4.19, 5.15, 9.73)
	case "gpuspec33":
		m = row(5.45, 6.91, 6.78, 7.88, 10.86, 13.54)
	case "cpu250":
		m = row(6.59, 8.55, 11.72, 12.01, 16.19, 19.58)
	}
	v, ok := m[policy]
	return v, ok
}

// Traces returns the pod lists of the published table, in its order.
func Traces() []string {
	return []string{"default", "gpushare100", "multigpu50", "gpuspec33", "cpu250"}
}

// ParseSeeds reads "42-51", "42,45" or a mix ("42-44,50").
func ParseSeeds(s string) ([]int64, error) {
	var out []int64
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, err := strconv.ParseInt(lo, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("seeds %q: %q is not a seed: want N, N-M or a comma-separated list", s, part)
		}
		b := a
		if isRange {
			if b, err = strconv.ParseInt(hi, 10, 64); err != nil || b < a {
				return nil, fmt.Errorf("seeds %q: range %q: want N-M with N <= M", s, part)
			}
		}
		for x := a; x <= b; x++ {
			out = append(out, x)
		}
	}
	return out, nil
}

// Job is one trace and policy to evaluate over seeds.
type Job struct {
	Trace  *Trace
	Policy string
}

// EvaluateAll runs the jobs on up to parallel goroutines and returns their
// results in job order. Each job runs its seeds in sequence.
func EvaluateAll(jobs []Job, seeds []int64, parallel int, progress func(*Result)) ([]*Result, error) {
	factories := make([]Factory, len(jobs))
	for i, j := range jobs {
		f, err := FactoryFor(j.Policy)
		if err != nil {
			return nil, err
		}
		factories[i] = f
	}
	out := make([]*Result, len(jobs))
	err := ForEach(len(jobs), parallel, func(i int) (err error) {
		out[i], err = Evaluate(jobs[i].Trace, jobs[i].Policy, factories[i], seeds)
		return err
	}, func(i int) {
		if progress != nil {
			progress(out[i])
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ForEach runs do(i) for every i in [0, n), parallel at once (at least
// one), and calls done(i), one call at a time, after each do(i) that
// succeeded. Once all have run it returns the error of the lowest i that
// failed, nil when none did.
func ForEach(n, parallel int, do func(i int) error, done func(i int)) error {
	errs := make([]error, n)
	sem := make(chan struct{}, max(parallel, 1))
	var wg sync.WaitGroup
	var mu sync.Mutex
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			if errs[i] = do(i); errs[i] == nil {
				mu.Lock()
				done(i)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// seedList renders seeds compactly ("42-51" for a run of consecutive
// seeds, else a space-separated list: commas would break the CSV).
func seedList(seeds []int64) string {
	if len(seeds) > 1 && seeds[len(seeds)-1]-seeds[0] == int64(len(seeds)-1) {
		return fmt.Sprintf("%d-%d", seeds[0], seeds[len(seeds)-1])
	}
	parts := make([]string, len(seeds))
	for i, s := range seeds {
		parts[i] = strconv.FormatInt(s, 10)
	}
	return strings.Join(parts, " ")
}

// WriteCSV writes bench/results/quality.csv: the header of CSVColumns
// and one row per result.
func WriteCSV(w io.Writer, results []*Result) error {
	return WriteCSVColumns(w, CSVColumns(), results)
}

// CSVRow renders one result in the six core columns
// "trace,policy,seeds,alloc100,alloc130,unalloc130".
func CSVRow(r *Result) string {
	return csvRow(CoreColumns(), r)
}

// WriteMarkdown writes the unallocated GPU % at 130% arrival as a table,
// one row per policy and one column per trace, with the published value
// next to the reproduced one where the paper has it.
func WriteMarkdown(w io.Writer, results []*Result) error {
	var traces, policies []string
	cell := map[[2]string]*Result{}
	for _, r := range results {
		if !contains(traces, r.Trace) {
			traces = append(traces, r.Trace)
		}
		if !contains(policies, r.Policy) {
			policies = append(policies, r.Policy)
		}
		cell[[2]string{r.Trace, r.Policy}] = r
	}
	var b strings.Builder
	b.WriteString("| policy |")
	for _, t := range traces {
		b.WriteString(" " + t + " |")
	}
	b.WriteString("\n|---|")
	b.WriteString(strings.Repeat("---|", len(traces)))
	b.WriteString("\n")
	for _, p := range policies {
		b.WriteString("| " + p + " |")
		for _, t := range traces {
			r := cell[[2]string{t, p}]
			switch {
			case r == nil:
				b.WriteString(" |")
			case hasPaper(t, p):
				v, _ := Published(t, p)
				fmt.Fprintf(&b, " %.2f (paper %.2f) |", r.Unalloc130(), v)
			default:
				fmt.Fprintf(&b, " %.2f |", r.Unalloc130())
			}
		}
		b.WriteString("\n")
	}
	if _, err := io.WriteString(w, b.String()); err != nil {
		return fmt.Errorf("write table: %w", err)
	}
	return nil
}

func hasPaper(trace, policy string) bool {
	_, ok := Published(trace, policy)
	return ok
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
