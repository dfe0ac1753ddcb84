package sim

import (
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// MilliPerGPU is one whole GPU in the trace's gpu_milli unit.
const MilliPerGPU = 1000

// Node is one GPU node of the trace.
type Node struct {
	Name string
	// CPU is in milli-cores, Memory in MiB.
	CPU, Memory int64
	// GPUs is the number of cards, each MilliPerGPU.
	GPUs int
	// Model is the card model (for example "V100M16").
	Model string
}

// Pod is one row of a pod list.
type Pod struct {
	Name string
	// CPU is in milli-cores, Memory in MiB.
	CPU, Memory int64
	// NumGPU is the number of cards; Milli the share of each card, in
	// [0, MilliPerGPU] (0 when NumGPU is 0).
	NumGPU int
	Milli  int64
	// Spec lists the card models the pod accepts; empty means any.
	Spec []string
}

// GPUMilli is the pod's total GPU request, Milli x NumGPU.
func (p *Pod) GPUMilli() int64 { return p.Milli * int64(p.NumGPU) }

// Accepts reports whether the pod may run on a card of the model.
func (p *Pod) Accepts(model string) bool {
	if len(p.Spec) == 0 {
		return true
	}
	for _, m := range p.Spec {
		if m == model {
			return true
		}
	}
	return false
}

// Trace is one experiment's input: the GPU nodes and one pod list, both
// sorted by name.
type Trace struct {
	Name  string
	Nodes []Node
	Pods  []Pod
}

// Capacity is the cluster's total GPU milli.
func (t *Trace) Capacity() int64 {
	var c int64
	for _, n := range t.Nodes {
		c += int64(n.GPUs) * MilliPerGPU
	}
	return c
}

// LoadTrace reads the GPU node list and the pod list named trace
// ("default", "gpushare100"...) from dir, which holds the openb CSV files,
// plain or gzipped (".csv.gz").
func LoadTrace(dir, trace string) (*Trace, error) {
	var nodes []Node
	if err := readCSV(dir, "openb_node_list_gpu_node.csv", func(r *csvRows) error {
		var err error
		nodes, err = parseNodes(r)
		return err
	}); err != nil {
		return nil, err
	}
	var pods []Pod
	if err := readCSV(dir, "openb_pod_list_"+trace+".csv", func(r *csvRows) error {
		var err error
		pods, err = parsePods(r)
		return err
	}); err != nil {
		return nil, err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return &Trace{Name: trace, Nodes: nodes, Pods: pods}, nil
}

// readCSV opens dir/name, or dir/name.gz when the plain file is absent,
// and hands its rows to parse.
func readCSV(dir, name string, parse func(*csvRows) error) error {
	path := filepath.Join(dir, name)
	f, err := os.Open(path)
	gz := false
	if errors.Is(err, os.ErrNotExist) {
		path += ".gz"
		f, err = os.Open(path)
		gz = true
	}
	if err != nil {
		return fmt.Errorf("open trace file: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if gz {
		zr, err := gzip.NewReader(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", path, err)
		}
		defer zr.Close()
		r = zr
	}
	rows, err := newCSVRows(r)
	if err == nil {
		err = parse(rows)
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	return nil
}

// csvRows reads a CSV with a header, giving fields by column name.
type csvRows struct {
	r    *csv.Reader
	cols map[string]int
	rec  []string
	line int
}

func newCSVRows(r io.Reader) (*csvRows, error) {
	cr := csv.NewReader(r)
	cr.ReuseRecord = true
	head, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("header: %w", err)
	}
	cols := make(map[string]int, len(head))
	for i, h := range head {
		cols[strings.TrimSpace(h)] = i
	}
	return &csvRows{r: cr, cols: cols, line: 1}, nil
}

// next advances to the next row; false at the end.
func (c *csvRows) next() (bool, error) {
	rec, err := c.r.Read()
	if err == io.EOF {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	c.rec, c.line = rec, c.line+1
	return true, nil
}

func (c *csvRows) str(col string) (string, error) {
	i, ok := c.cols[col]
	if !ok {
		return "", fmt.Errorf("no column %q", col)
	}
	return c.rec[i], nil
}

func (c *csvRows) int(col string) (int64, error) {
	s, err := c.str(col)
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("line %d column %s=%q: want an integer", c.line, col, s)
	}
	return v, nil
}

func parseNodes(r *csvRows) ([]Node, error) {
	var out []Node
	for {
		ok, err := r.next()
		if err != nil || !ok {
			return out, err
		}
		var n Node
		var gpus int64
		if n.Name, err = r.str("sn"); err != nil {
			return nil, err
		}
		if n.CPU, err = r.int("cpu_milli"); err != nil {
			return nil, err
		}
		if n.Memory, err = r.int("memory_mib"); err != nil {
			return nil, err
		}
		if gpus, err = r.int("gpu"); err != nil {
			return nil, err
		}
		if n.Model, err = r.str("model"); err != nil {
			return nil, err
		}
		if gpus <= 0 {
			continue
		}
		n.GPUs = int(gpus)
		out = append(out, n)
	}
}

func parsePods(r *csvRows) ([]Pod, error) {
	var out []Pod
	for {
		ok, err := r.next()
		if err != nil || !ok {
			return out, err
		}
		var p Pod
		var num int64
		var spec string
		if p.Name, err = r.str("name"); err != nil {
			return nil, err
		}
		if p.CPU, err = r.int("cpu_milli"); err != nil {
			return nil, err
		}
		if p.Memory, err = r.int("memory_mib"); err != nil {
			return nil, err
		}
		if num, err = r.int("num_gpu"); err != nil {
			return nil, err
		}
		if num > 0 {
			if p.Milli, err = r.int("gpu_milli"); err != nil {
				return nil, err
			}
			p.Milli = min(max(p.Milli, 0), MilliPerGPU)
		}
		p.NumGPU = int(num)
		// The multigpu lists have no gpu_spec column.
		if _, ok := r.cols["gpu_spec"]; ok {
			spec, _ = r.str("gpu_spec")
		}
		for _, m := range strings.Split(spec, "|") {
			if m = strings.TrimSpace(m); m != "" {
				p.Spec = append(p.Spec, m)
			}
		}
		out = append(out, p)
	}
}
