package kubectlvshare

import (
	"testing"
)

// TestTables runs every command in table and wide format against the
// fixture and compares the output with the golden files.
func TestTables(t *testing.T) {
	tests := []struct {
		name     string
		args     []string
		wantCode int
	}{
		{name: "cards", args: []string{"cards"}},
		{name: "cards-wide", args: []string{"cards", "-o", "wide"}},
		{name: "cards-node", args: []string{"cards", "--node", "gpu-a"}},
		{name: "pods", args: []string{"pods", "-A"}},
		{name: "pods-wide", args: []string{"pods", "-o", "wide"}},
		{name: "fit", args: []string{"fit", "--memory", "20000", "--cores", "30", "--number", "2", "--type", "A100"}},
		{name: "fit-none", args: []string{"fit", "--memory", "39000", "--number", "2"}, wantCode: ExitNoFit},
		{name: "fit-wide", args: []string{"fit", "--memory", "20000", "-o", "wide"}},
		{name: "fit-ascend", args: []string{"fit", "--type", "Ascend910B3", "--memory", "30000"}},
		{name: "why", args: []string{"why", "waiter"}},
		{name: "why-bound", args: []string{"why", "infer-0", "-o", "wide"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := newFakeEnv(t).run(tc.args...)
			if code != tc.wantCode {
				t.Fatalf("exit code %d, want %d; stderr:\n%s", code, tc.wantCode, errOut)
			}
			golden(t, tc.name+".txt", out)
		})
	}
}
