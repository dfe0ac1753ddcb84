package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// writeTrace writes a small cluster (ten GPU nodes and a CPU-only one,
// which is dropped) and a pod list in the openb format: shares of at most
// half a card, so that every arrival percentage bin gets events.
func writeTrace(t *testing.T) (nodes, pods string) {
	t.Helper()
	dir := t.TempDir()
	nodes = filepath.Join(dir, "openb_node_list_gpu_node.csv")
	pods = filepath.Join(dir, "openb_pod_list_tiny.csv")
	var n, p strings.Builder
	n.WriteString("sn,cpu_milli,memory_mib,gpu,model\n")
	for i := range 10 {
		fmt.Fprintf(&n, "node-%d,32000,131072,4,%s\n", i, []string{"T4", "V100M16"}[i%2])
	}
	n.WriteString("node-cpu,16000,65536,0,\n")
	p.WriteString("name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n")
	for i := range 60 {
		spec := []string{"", "T4", "V100M16|T4"}[i%3]
		fmt.Fprintf(&p, "pod-%02d,%d,4096,%d,%d,%s,LS,Running,0,1,0\n", i, 1000+i%4*500, min(i%7, 1), 100+i%5*100, spec)
	}
	for path, body := range map[string]string{nodes: n.String(), pods: p.String()} {
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return nodes, pods
}

func TestCSVOutput(t *testing.T) {
	nodes, pods := writeTrace(t)
	var out, errOut bytes.Buffer
	code := run([]string{"--nodes", nodes, "--pods", pods, "--policy", "bestfit,binpack,volcano-builtin", "--seeds", "42-44"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d, stderr:\n%s", code, errOut.String())
	}
	t.Logf("output:\n%s", out.String())
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 4 || lines[0] != "trace,policy,seeds,alloc100,alloc130,unalloc130" {
		t.Fatalf("output:\n%s\nwant the header and three rows", out.String())
	}
	row := regexp.MustCompile(`^tiny,(bestfit|binpack|volcano-builtin),42-44,(\d+\.\d\d),(\d+\.\d\d),(\d+\.\d\d)$`)
	for i, policy := range []string{"bestfit", "binpack", "volcano-builtin"} {
		m := row.FindStringSubmatch(lines[i+1])
		if m == nil || m[1] != policy {
			t.Errorf("row %d = %q, want trace tiny, policy %s, seeds 42-44 and three 2-decimal percentages", i+1, lines[i+1], policy)
		}
	}
	// The last line ends with the unallocated GPU % at 130%: 100 - alloc130.
	last := strings.Split(lines[len(lines)-1], ",")
	alloc130, err1 := strconv.ParseFloat(last[len(last)-2], 64)
	unalloc130, err2 := strconv.ParseFloat(last[len(last)-1], 64)
	if err1 != nil || err2 != nil || math.Abs(100-alloc130-unalloc130) > 0.005 {
		t.Errorf("last line %q: want it to end with alloc130,unalloc130 where unalloc130 = 100 - alloc130", lines[len(lines)-1])
	}
	if !strings.Contains(errOut.String(), "tracesim: volcano-builtin on tiny: unallocated GPU % at 130%") {
		t.Errorf("stderr %q: want the seed spread of every policy", errOut.String())
	}
}

func TestUsageErrors(t *testing.T) {
	nodes, pods := writeTrace(t)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no pods", []string{"--nodes", nodes}, 2, "--nodes and --pods are required"},
		{"unknown policy", []string{"--nodes", nodes, "--pods", pods, "--policy", "nope"}, 1, `policy "nope"`},
		{"bad seeds", []string{"--nodes", nodes, "--pods", pods, "--seeds", "51-42"}, 1, "N-M with N <= M"},
		{"missing file", []string{"--nodes", nodes, "--pods", pods + ".missing"}, 1, "open trace file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			if code := run(tc.args, &out, &errOut); code != tc.code || !strings.Contains(errOut.String(), tc.want) {
				t.Errorf("exit %d, stderr %q; want exit %d and %q", code, errOut.String(), tc.code, tc.want)
			}
		})
	}
}
