package sim

import (
	"path/filepath"
	"sort"
	"strings"
)

// LoadTraceFiles reads a node list and a pod list from explicit paths
// (plain, or gzipped when only path.gz exists). Only nodes with GPUs are
// kept, as LoadTrace does with the GPU node list. The trace is named after
// the pod file: its base name without "openb_pod_list_", ".gz" and ".csv".
func LoadTraceFiles(nodesPath, podsPath string) (*Trace, error) {
	var nodes []Node
	if err := readCSV(filepath.Dir(nodesPath), filepath.Base(nodesPath), func(r *csvRows) error {
		var err error
		nodes, err = parseNodes(r)
		return err
	}); err != nil {
		return nil, err
	}
	var pods []Pod
	if err := readCSV(filepath.Dir(podsPath), filepath.Base(podsPath), func(r *csvRows) error {
		var err error
		pods, err = parsePods(r)
		return err
	}); err != nil {
		return nil, err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	sort.Slice(pods, func(i, j int) bool { return pods[i].Name < pods[j].Name })
	return &Trace{Name: TraceName(podsPath), Nodes: nodes, Pods: pods}, nil
}

// TraceName is the trace a pod list file holds: "openb_pod_list_default.csv"
// is "default".
func TraceName(podsPath string) string {
	name := strings.TrimSuffix(filepath.Base(podsPath), ".gz")
	name = strings.TrimSuffix(name, ".csv")
	return strings.TrimPrefix(name, "openb_pod_list_")
}
