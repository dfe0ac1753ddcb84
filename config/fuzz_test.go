package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// FuzzParse checks that Parse never panics, that whatever it accepts
// validates, and that an accepted configuration written back out as JSON
// parses to the same configuration.
func FuzzParse(f *testing.F) {
	seeds, err := filepath.Glob("testdata/*.*")
	if err != nil {
		f.Fatalf("list testdata: %v", err)
	}
	seeds = append(seeds, "samples/device-config.yaml")
	for _, name := range seeds {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatalf("read seed: %v", err)
		}
		f.Add(data)
	}
	for _, doc := range []string{
		"",
		"nvidia: {deviceSplitCount: 0}",
		"vnpus: [{chipName: a, commonWord: b, memoryCapacity: 1, aiCore: 1, templates: [{name: t, memory: 2}]}]",
		"nvidia: {knownMigGeometries: [{models: [x], allowedGeometries: [[{name: 7g.1gb, memory: 1, count: 1}]]}]}",
		"nodeconfig: [{name: n, libcudaloglevel: 3, devicesplitcount: 0}]",
		"nvidia: {libCudaLogLevel: \"01\", memoryFactor: 2}",
		"- [",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if c != nil {
				t.Fatalf("Parse() returned a config with the error %v", err)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("Parse() accepted a config that does not validate: %v", err)
		}
		out, err := json.Marshal(c)
		if err != nil {
			t.Fatalf("marshal accepted config: %v", err)
		}
		again, err := Parse(out)
		if err != nil {
			t.Fatalf("Parse(Marshal(config)) error: %v\ndocument: %s", err, out)
		}
		ignore := cmpopts.IgnoreFields(Config{}, "IgnoredSections")
		ignoreForm := cmpopts.IgnoreFields(VNPUs{}, "ListForm")
		if diff := cmp.Diff(c, again, cmpopts.EquateEmpty(), ignore, ignoreForm); diff != "" {
			t.Errorf("round trip mismatch (-parsed +reparsed):\n%s", diff)
		}
	})
}
