package quality

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// traceDir is where the tests read the openb files: $VSHARE_OPENB_DIR, else
// bench/testdata/openb (filled by its fetch.sh), else the workspace's shared
// copy next to the repository (../shared/traces/openb), as on the machines
// this project is developed on.
func traceDir() string {
	if d := os.Getenv("VSHARE_OPENB_DIR"); d != "" {
		return d
	}
	local := filepath.Join("..", "testdata", "openb")
	shared := filepath.Join("..", "..", "..", "shared", "traces", "openb")
	for _, d := range []string{local, shared} {
		for _, f := range []string{"openb_node_list_gpu_node.csv", "openb_node_list_gpu_node.csv.gz"} {
			if _, err := os.Stat(filepath.Join(d, f)); err == nil {
				return d
			}
		}
	}
	return local
}

// traces caches loaded traces across tests.
var traces sync.Map

// loadTrace loads a trace once, skipping the test when the files are not
// there (see bench/testdata/openb/README.md).
func loadTrace(t *testing.T, name string) *Trace {
	t.Helper()
	if tr, ok := traces.Load(name); ok {
		return tr.(*Trace)
	}
	tr, err := LoadTrace(traceDir(), name)
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("openb trace not found in %s: run bench/testdata/openb/fetch.sh (see its README.md)", traceDir())
	}
	if err != nil {
		t.Fatalf("LoadTrace(%s): %v", name, err)
	}
	traces.Store(name, tr)
	return tr
}

// runSeed runs one policy on one seed.
func runSeed(t *testing.T, tr *Trace, policy string, seed int64) Curve {
	t.Helper()
	f, err := FactoryFor(policy)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Run(tr, f, seed)
	if err != nil {
		t.Fatalf("Run(%s, %s, %d): %v", tr.Name, policy, seed, err)
	}
	return c
}
