package quality

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// traceDir is where the tests read the openb files: $VSHARE_OPENB_DIR, else
// bench/testdata/openb (committed), else the workspace's shared
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

// qualityRequired reports whether VSHARE_QUALITY_REQUIRED=1 is set, as
// `make quality-check` (part of `make test`) sets it: a quality test that
// would skip, for a missing trace or because it is slow, fails instead, so
// the check cannot pass by not running.
func qualityRequired() bool {
	return os.Getenv("VSHARE_QUALITY_REQUIRED") == "1"
}

// skipOrFail skips the test, or fails it under VSHARE_QUALITY_REQUIRED=1.
func skipOrFail(t *testing.T, reason string) {
	t.Helper()
	if qualityRequired() {
		t.Fatalf("%s; VSHARE_QUALITY_REQUIRED=1 makes this a failure", reason)
	}
	t.Skip(reason)
}

// skipSlow skips a full-trace test under the race detector (unless
// VSHARE_QUALITY_FULL=1) and in -short mode, through skipOrFail.
func skipSlow(t *testing.T) {
	t.Helper()
	if raceEnabled && os.Getenv("VSHARE_QUALITY_FULL") == "" {
		skipOrFail(t, "slow under -race; set VSHARE_QUALITY_FULL=1 to run it")
	}
	if testing.Short() {
		skipOrFail(t, "full trace run skipped in -short mode")
	}
}

// loadTrace loads a trace once, skipping the test when the files are not
// there (see bench/testdata/openb/README.md), or failing it under
// VSHARE_QUALITY_REQUIRED=1.
func loadTrace(t *testing.T, name string) *Trace {
	t.Helper()
	if tr, ok := traces.Load(name); ok {
		return tr.(*Trace)
	}
	tr, err := LoadTrace(traceDir(), name)
	if errors.Is(err, os.ErrNotExist) {
		skipOrFail(t, fmt.Sprintf("openb trace %s not found in %s: %v (restore bench/testdata/openb with its fetch.sh, see its README.md)", name, traceDir(), err))
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
