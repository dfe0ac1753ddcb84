package cli

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTraces writes a small cluster in the openb format (ten GPU nodes)
// and the same small pod list under each name.
func writeTraces(t *testing.T, names ...string) string {
	t.Helper()
	dir := t.TempDir()
	var n, p strings.Builder
	n.WriteString("sn,cpu_milli,memory_mib,gpu,model\n")
	for i := range 10 {
		fmt.Fprintf(&n, "node-%d,32000,131072,4,%s\n", i, []string{"T4", "V100M16"}[i%2])
	}
	p.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
	for i := range 60 {
		fmt.Fprintf(&p, "pod-%02d,%d,4096,%d,%d,,LS,Running,0,1,0\n", i, 1000+i%4*500, min(i%7, 1), 100+i%5*100)
	}
	files := map[string]string{"openb_node_list_gpu_node.csv": n.String()}
	for _, name := range names {
		files["openb_pod_list_"+name+".csv"] = p.String()
	}
	for f, body := range files {
		if err := os.WriteFile(filepath.Join(dir, f), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestRunWritesReport(t *testing.T) {
	dir := writeTraces(t, "default", "gpushare20")
	outDir := t.TempDir()
	o := Options{
		Dir: dir, Traces: "default,gpushare20", Policies: "fragment,fgd,bestfit", Seeds: "42-43", Parallel: 1,
		CSV: filepath.Join(outDir, "quality.csv"), SeedCSV: filepath.Join(outDir, "seeds.csv"),
		SVG: outDir, MarkdownFile: filepath.Join(outDir, "quality.md"), Markdown: true,
	}
	var out, log bytes.Buffer
	if err := Run(o, &out, &log); err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	header := "trace,policy,seeds,alloc100,alloc130,unalloc130,unalloc130_sd,unalloc130_ci95,alloc100_sd,alloc100_ci95,tuning"
	if !strings.HasPrefix(out.String(), header+"\n") {
		t.Errorf("stdout starts %q, want the CSV header %q", strings.SplitN(out.String(), "\n", 2)[0], header)
	}
	read := func(name string) string {
		b, err := os.ReadFile(filepath.Join(outDir, name))
		if err != nil {
			t.Errorf("%s: %v", name, err)
		}
		return string(b)
	}
	if csv := read("quality.csv"); strings.Count(csv, "\n") != 1+2*3 || !strings.Contains(csv, "gpushare20,fgd,42-43,") || !strings.HasSuffix(csv, ",no\n") {
		t.Errorf("quality.csv:\n%s\nwant the header and six rows, the held-out trace's tuning column \"no\"", csv)
	}
	if seeds := read("seeds.csv"); strings.Count(seeds, "\n") != 1+2*3*2 {
		t.Errorf("seeds.csv:\n%s\nwant the header and 12 rows", seeds)
	}
	md := read("quality.md")
	for _, want := range []string{"| default | tuning |", "| gpushare20 | held-out |", "fragment below fgd on ", "(paper 4.61)"} {
		if !strings.Contains(md, want) {
			t.Errorf("quality.md lacks %q:\n%s", want, md)
		}
	}
	if !strings.Contains(out.String(), md) {
		t.Errorf("--markdown printed something else than the markdown file holds")
	}
	read("quality-traces.svg")
	read("quality-default.svg")

	// The same report again from the seed CSV alone, running nothing.
	again := t.TempDir()
	o2 := Options{FromSeeds: filepath.Join(outDir, "seeds.csv"), CSV: filepath.Join(again, "quality.csv"),
		MarkdownFile: filepath.Join(again, "quality.md"), SVG: again}
	if err := Run(o2, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatalf("Run --from-seeds: %v", err)
	}
	for _, f := range []string{"quality.csv", "quality.md"} {
		b, err := os.ReadFile(filepath.Join(again, f))
		if err != nil || string(b) != read(f) {
			t.Errorf("%s from the seed CSV (err %v):\n%s\nwant the run's:\n%s", f, err, b, read(f))
		}
	}
	if _, err := os.Stat(filepath.Join(again, "quality-default.svg")); !os.IsNotExist(err) {
		t.Errorf("--from-seeds wrote a curve plot (%v); the seed CSV has no curves", err)
	}
	if _, err := os.Stat(filepath.Join(outDir, "quality-gpushare20.svg")); !os.IsNotExist(err) {
		t.Errorf("quality-gpushare20.svg: %v; want no curve plot for a held-out trace under --curves tuning", err)
	}
}

func TestRunBadFlags(t *testing.T) {
	dir := writeTraces(t, "default")
	for _, tc := range []struct {
		name string
		o    Options
		want string
	}{
		{"curves", Options{Dir: dir, Traces: "default", Policies: "fgd", Seeds: "42", Curves: "some"}, `--curves "some": want tuning, all or none`},
		{"no traces", Options{Dir: dir, Traces: " , ", Policies: "fgd", Seeds: "42"}, `--traces " , "`},
		{"missing trace", Options{Dir: dir, Traces: "cpu0", Policies: "fgd", Seeds: "42"}, "load trace cpu0"},
		{"missing seed CSV", Options{FromSeeds: filepath.Join(dir, "nope.csv")}, "--from-seeds: open"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, log bytes.Buffer
			if err := Run(tc.o, &out, &log); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Run: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestRunWithBound checks --bound: the four limit columns on every row,
// the distance table, the offline packing at most the bound on each trace,
// and the same output whatever the parallelism and from the seed CSV.
func TestRunWithBound(t *testing.T) {
	dir := writeTraces(t, "default", "gpushare20", "multigpu50")
	outDir := t.TempDir()
	o := Options{
		Dir: dir, Traces: "default,gpushare20,multigpu50", Policies: "fragment,fgd", Seeds: "42-43", Parallel: 2, Bound: true,
		SeedCSV: filepath.Join(outDir, "seeds.csv"), MarkdownFile: filepath.Join(outDir, "quality.md"),
	}
	var out, log bytes.Buffer
	if err := Run(o, &out, &log); err != nil {
		t.Fatalf("Run: %v\n%s", err, log.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if !strings.HasSuffix(lines[0], ",tuning,bound100,bound130,offline100,offline130") || len(lines) != 1+3*2 {
		t.Fatalf("CSV:\n%s\nwant the limit columns last and six rows", out.String())
	}
	for _, l := range lines[1:] {
		var b100, b130, o100, o130 float64
		f := strings.Split(l, ",")
		if _, err := fmt.Sscanf(strings.Join(f[len(f)-4:], " "), "%g %g %g %g", &b100, &b130, &o100, &o130); err != nil {
			t.Fatalf("row %q: %v", l, err)
		}
		if o100 > b100 || o130 > b130 || o100 <= 0 || o130 <= 0 {
			t.Errorf("row %q: offline packing %.2f / %.2f, want above 0 and at most the bound %.2f / %.2f", l, o100, o130, b100, b130)
		}
	}
	md, err := os.ReadFile(filepath.Join(outDir, "quality.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| trace | set | bound 130 | offline 130 |", "| multigpu50 | tuning |", "of FGD's distance to the offline packing"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("quality.md lacks %q:\n%s", want, md)
		}
	}
	if strings.Count(log.String(), "limits of ") != 3 {
		t.Errorf("log:\n%s\nwant one limits line per trace", log.String())
	}

	var again bytes.Buffer
	o2 := Options{Dir: dir, FromSeeds: filepath.Join(outDir, "seeds.csv"), Bound: true, Parallel: 1}
	if err := Run(o2, &again, &bytes.Buffer{}); err != nil {
		t.Fatalf("Run --from-seeds --bound: %v", err)
	}
	if again.String() != out.String() {
		t.Errorf("--from-seeds --bound --parallel 1:\n%s\nwant the run's:\n%s", again.String(), out.String())
	}
}
