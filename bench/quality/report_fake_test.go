package quality

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"
)

// fakeResult is a result with the given per-seed allocations (seeds 42..),
// its means computed as Evaluate does.
func fakeResult(trace, policy string, alloc100, alloc130 []float64) *Result {
	r := &Result{Trace: trace, Policy: policy, SeedAlloc100: alloc100, SeedAlloc130: alloc130, Curve: make([]float64, MaxArrival+1)}
	for i := range alloc130 {
		r.Seeds = append(r.Seeds, int64(42+i))
		r.Alloc100 += alloc100[i] / float64(len(alloc130))
		r.Alloc130 += alloc130[i] / float64(len(alloc130))
	}
	return r
}

// shifted returns xs + d.
func shifted(xs []float64, d float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x + d
	}
	return out
}

func TestCSVColumnsAndRows(t *testing.T) {
	results := []*Result{
		// unallocated 5, 4, 3: sd 1, ci 4.303/sqrt(3) = 2.484338.
		// alloc100 90, 91, 95: mean 92, sd sqrt(14/2) = 2.645751, ci 4.303*2.645751/sqrt(3) = 6.573015.
		fakeResult("default", "fragment", []float64{90, 91, 95}, []float64{95, 96, 97}),
		fakeResult("gpushare40", "fgd", []float64{93.5}, []float64{96.25}),
	}
	var b bytes.Buffer
	if err := WriteCSV(&b, results); err != nil {
		t.Fatal(err)
	}
	want := "trace,policy,seeds,alloc100,alloc130,unalloc130,unalloc130_sd,unalloc130_ci95,alloc100_sd,alloc100_ci95,tuning\n" +
		"default,fragment,42-44,92.00,96.00,4.00,1.00,2.48,2.65,6.57,yes\n" +
		"gpushare40,fgd,42,93.50,96.25,3.75,,,,,no\n"
	if b.String() != want {
		t.Errorf("WriteCSV:\n%s\nwant:\n%s", b.String(), want)
	}
	if got := CSVRow(results[0]); got != "default,fragment,42-44,92.00,96.00,4.00" {
		t.Errorf("CSVRow = %q, want the six core columns", got)
	}
	b.Reset()
	if err := WriteSeedCSV(&b, results); err != nil {
		t.Fatal(err)
	}
	wantSeeds := "trace,policy,seed,alloc100,alloc130,unalloc130\n" +
		"default,fragment,42,90.00,95.00,5.00\ndefault,fragment,43,91.00,96.00,4.00\ndefault,fragment,44,95.00,97.00,3.00\n" +
		"gpushare40,fgd,42,93.50,96.25,3.75\n"
	if b.String() != wantSeeds {
		t.Errorf("WriteSeedCSV:\n%s\nwant:\n%s", b.String(), wantSeeds)
	}
}

func TestTraceSets(t *testing.T) {
	all := AllTraces()
	if len(all) != 24 {
		t.Fatalf("AllTraces() has %d traces, want 24", len(all))
	}
	seen := map[string]bool{}
	for i, tr := range all {
		if seen[tr] {
			t.Errorf("AllTraces() lists %s twice", tr)
		}
		seen[tr] = true
		if want := i < 5; IsTuning(tr) != want {
			t.Errorf("trace %d (%s): IsTuning = %v, want %v (the five tuning traces first)", i, tr, IsTuning(tr), want)
		}
	}
	if got, want := strings.Join(TraceSet("tuning"), ","), "default,gpushare100,multigpu50,gpuspec33,cpu250"; got != want {
		t.Errorf("TraceSet(tuning) = %s, want %s", got, want)
	}
	if got := TraceSet("held-out"); len(got) != 19 || got[0] != "gpushare20" {
		t.Errorf("TraceSet(held-out) = %v, want the 19 others, gpushare20 first", got)
	}
	if got := strings.Join(TraceSet(" cpu0, default ,"), ","); got != "cpu0,default" {
		t.Errorf("TraceSet(list) = %s, want cpu0,default", got)
	}
}

// fakeTable is every trace of AllTraces under fragment, fgd and
// volcano-builtin, ten seeds each, where fragment leaves 0.3 points less
// than FGD (the same on every seed) except on gpushare100 (0.02 less on
// average, alternating around it: within the spread) and cpu0 (0.1 more);
// at 100% fragment allocates 2 points less than the built-in on gpuspec33.
func fakeTable() []*Result {
	base := []float64{95.0, 95.2, 94.9, 95.1, 95.3, 94.8, 95.0, 95.2, 95.1, 94.9}
	var out []*Result
	for _, tr := range AllTraces() {
		frag130 := shifted(base, 0.3)
		switch tr {
		case "gpushare100":
			frag130 = shifted(base, 0.02)
			for i := range frag130 {
				if i%2 == 0 {
					frag130[i] += 0.2
				} else {
					frag130[i] -= 0.2
				}
			}
		case "cpu0":
			frag130 = shifted(base, -0.1)
		}
		frag100 := shifted(base, -1)
		if tr == "gpuspec33" {
			frag100 = shifted(base, -3)
		}
		out = append(out,
			fakeResult(tr, PolicyFragment, frag100, frag130),
			fakeResult(tr, PolicyFGD, shifted(base, -1), base),
			fakeResult(tr, PolicyBuiltin, shifted(base, -1), shifted(base, -1)),
		)
	}
	return out
}

func TestComparisonSummary(t *testing.T) {
	results := fakeTable()
	cs := Compare(results, PolicyFragment, PolicyFGD)
	if len(cs) != 24 {
		t.Fatalf("Compare: %d comparisons, want 24", len(cs))
	}
	got := SummaryLine(cs, PolicyFragment, PolicyFGD)
	want := "fragment below fgd on 23 of 24, by more than the seed spread on 22 (not on gpushare100, cpu0); " +
		"held-out: below on 18 of 19, by more than the seed spread on 18; tuning: below on 5 of 5, by more than the seed spread on 4."
	if got != want {
		t.Errorf("SummaryLine:\n got %s\nwant %s", got, want)
	}
	got = Worse100Line(Compare(results, PolicyFragment, PolicyBuiltin), PolicyFragment, PolicyBuiltin)
	want = "At 100% arrival fragment allocates less than volcano-builtin on 1 of 24 (gpuspec33), by more than the seed spread on 1 (gpuspec33)."
	if got != want {
		t.Errorf("Worse100Line:\n got %s\nwant %s", got, want)
	}
}

func TestSummaryOneSeed(t *testing.T) {
	a := fakeResult("default", PolicyFragment, []float64{90}, []float64{95.5})
	b := fakeResult("default", PolicyFGD, []float64{90}, []float64{95})
	got := SummaryLine(Compare([]*Result{a, b}, PolicyFragment, PolicyFGD), PolicyFragment, PolicyFGD)
	if want := "fragment below fgd on 1 of 1 (one seed: no seed spread)."; got != want {
		t.Errorf("SummaryLine = %q, want %q", got, want)
	}
}

func TestComparisonRounding(t *testing.T) {
	// A margin of -0.004 shows as -0.00: not below.
	a := fakeResult("default", PolicyFragment, []float64{90, 90}, []float64{95.004, 95.004})
	b := fakeResult("default", PolicyFGD, []float64{90, 90}, []float64{95, 95})
	if c := Compare([]*Result{a, b}, PolicyFragment, PolicyFGD)[0]; c.Below() || c.ClearlyBelow() {
		t.Errorf("margin %.3f: Below %v, ClearlyBelow %v; want neither", c.Margin130.Mean, c.Below(), c.ClearlyBelow())
	}
}

func TestWriteComparisonMarkdown(t *testing.T) {
	var b bytes.Buffer
	if err := WriteComparison(&b, fakeTable()); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"| trace | set | fragment | fgd | volcano-builtin | fragment − fgd | fragment − volcano-builtin |",
		"| trace | set | fragment | volcano-builtin | fgd | fragment − volcano-builtin |",
		// base: mean 95.05, squares 0.225, sd sqrt(0.225/9) = 0.1581,
		// ci 2.262 * 0.1581 / sqrt(10) = 0.1131.
		"| default | tuning | 4.65 ± 0.11 | 4.95 ± 0.11 | 5.95 ± 0.11 | **-0.30 ± 0.00** | **-1.30 ± 0.00** |",
		// paired margins 0.22 and -0.18 alternating: mean 0.02, sd
		// sqrt(10 * 0.04 / 9) = 0.2108, ci 2.262 * 0.2108 / sqrt(10) = 0.1508.
		"| 4.95 ± 0.11 | 5.95 ± 0.11 | -0.02 ± 0.15 | **-1.02 ± 0.15** |",
		// Above FGD by more than the spread: bold too (the sign says which way).
		"| cpu0 | held-out | 5.05 ± 0.11 | 4.95 ± 0.11 | 5.95 ± 0.11 | **0.10 ± 0.00** | **-0.90 ± 0.00** |",
		"fragment below fgd on 23 of 24",
		"fragment below volcano-builtin on 24 of 24, by more than the seed spread on 24;",
		"| gpuspec33 | tuning | 92.05 ± 0.11 | 94.05 ± 0.11 | 94.05 ± 0.11 | **-2.00 ± 0.00** |",
		"| default | tuning | 94.05 ± 0.11 | 94.05 ± 0.11 | 94.05 ± 0.11 | 0.00 ± 0.00 |",
		"At 100% arrival fragment allocates less than volcano-builtin on 1 of 24 (gpuspec33)",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	if rows := strings.Count(md, "| held-out |"); rows != 3*19 {
		t.Errorf("markdown has %d held-out rows, want 19 in each of the three tables", rows)
	}
	every := md[strings.Index(md, "Every policy"):]
	if !strings.Contains(every, "| trace | set | fragment | fgd | volcano-builtin |\n") ||
		!strings.Contains(every, "| cpu0 | held-out | 5.05 ± 0.11 | 4.95 ± 0.11 | 5.95 ± 0.11 |\n") {
		t.Errorf("the every-policy table lacks the header or cpu0's row:\n%s", every)
	}
	if t.Failed() {
		t.Logf("markdown:\n%s", md)
	}
}

func TestComparisonSVG(t *testing.T) {
	results := fakeTable()
	results = append(results, fakeResult("default", PolicyBinpack, []float64{94, 94}, []float64{95, 95.5}))
	var b bytes.Buffer
	if err := WriteComparisonSVG(&b, results); err != nil {
		t.Fatal(err)
	}
	series := map[string]int{}
	markers := map[string]int{}
	bands := 0
	var current string
	dec := xml.NewDecoder(&b)
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			switch {
			case e.Name.Local == "g" && attr(e, "class") == "series":
				current = attr(e, "data-policy")
				series[current]++
			case e.Name.Local == "circle" && current != "":
				markers[current]++
			case e.Name.Local == "rect" && attr(e, "fill") == cmpTuningBand:
				bands++
			}
		case xml.EndElement:
			if e.Name.Local == "g" {
				current = ""
			}
		}
	}
	want := map[string]int{PolicyFragment: 1, PolicyFGD: 1, PolicyBuiltin: 1, PolicyBinpack: 1}
	if len(series) != len(want) {
		t.Errorf("series %v, want one per policy: %v", series, want)
	}
	for p := range want {
		if series[p] != 1 {
			t.Errorf("policy %s has %d series, want 1", p, series[p])
		}
	}
	// Top panel 24 + bottom (minus FGD) 24 + legend 1; FGD has no bottom
	// markers; binpack ran one trace.
	for p, n := range map[string]int{PolicyFragment: 49, PolicyFGD: 25, PolicyBuiltin: 49, PolicyBinpack: 3} {
		if markers[p] != n {
			t.Errorf("policy %s: %d markers, want %d", p, markers[p], n)
		}
	}
	if bands != 5 {
		t.Errorf("%d tuning bands, want 5", bands)
	}
}

func attr(e xml.StartElement, name string) string {
	for _, a := range e.Attr {
		if a.Name.Local == name {
			return a.Value
		}
	}
	return ""
}

// TestAllTracesAreTheFiles checks AllTraces against the openb pod lists
// on disk, both ways, when the trace is there.
func TestAllTracesAreTheFiles(t *testing.T) {
	dir := traceDir()
	files, err := filepath.Glob(filepath.Join(dir, "openb_pod_list_*.csv*"))
	if err != nil || len(files) == 0 {
		t.Skipf("no openb pod lists in %s", dir)
	}
	onDisk := map[string]bool{}
	for _, f := range files {
		onDisk[TraceName(f)] = true
	}
	for _, tr := range AllTraces() {
		if !onDisk[tr] {
			t.Errorf("AllTraces lists %s, but %s has no openb_pod_list_%s.csv(.gz)", tr, dir, tr)
		}
		delete(onDisk, tr)
	}
	for tr := range onDisk {
		t.Errorf("%s has pod list %s, which AllTraces lacks", dir, tr)
	}
}

func TestSeedCSVRoundTrip(t *testing.T) {
	results := []*Result{
		fakeResult("default", PolicyFragment, []float64{90.01, 91.37, 95.5}, []float64{95.13, 96.07, 97.29}),
		fakeResult("cpu0", PolicyFGD, []float64{93.5}, []float64{96.25}),
	}
	var seeds, want, got bytes.Buffer
	if err := WriteSeedCSV(&seeds, results); err != nil {
		t.Fatal(err)
	}
	back, err := ReadSeedCSV(strings.NewReader(seeds.String()))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range back {
		if r.Alloc100 != results[i].Alloc100 || r.Alloc130 != results[i].Alloc130 {
			t.Errorf("%s/%s: means %v/%v, want exactly %v/%v", r.Trace, r.Policy, r.Alloc100, r.Alloc130, results[i].Alloc100, results[i].Alloc130)
		}
	}
	if err := WriteCSV(&want, results); err != nil {
		t.Fatal(err)
	}
	if err := WriteCSV(&got, back); err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("CSV from the seed CSV:\n%s\nwant:\n%s", got.String(), want.String())
	}
}

func TestReadSeedCSVErrors(t *testing.T) {
	const h = "trace,policy,seed,alloc100,alloc130,unalloc130\n"
	for _, tc := range []struct{ name, in, want string }{
		{"header", "trace,policy\n", "want the header"},
		{"seed", h + "default,fgd,x,90,95,5\n", `line 2: seed "x"`},
		{"alloc130", h + "default,fgd,42,90,abc,5\n", `line 2: alloc130 "abc"`},
		{"twice", h + "default,fgd,42,90,95,5\ndefault,fgd,42,90,95,5\n", "line 3: seed 42 of default/fgd twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := ReadSeedCSV(strings.NewReader(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("ReadSeedCSV: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}
