//go:build e2e

package framework

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ruleFields reads rules as `iptables -S` prints them, kube-proxy's quoted
// comments included, so that removeKubeChains can delete them with -D.
func TestRuleFields(t *testing.T) {
	tests := []struct {
		name, line string
		want       []string
	}{
		{name: "plain", line: "-A PREROUTING -j KUBE-SERVICES", want: []string{"-A", "PREROUTING", "-j", "KUBE-SERVICES"}},
		{name: "quoted comment", line: `-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES`,
			want: []string{"-A", "PREROUTING", "-m", "comment", "--comment", "kubernetes service portals", "-j", "KUBE-SERVICES"}},
		{name: "escaped quote in a comment", line: `-A X -m comment --comment "a \"b\" c" -j Y`,
			want: []string{"-A", "X", "-m", "comment", "--comment", `a "b" c`, "-j", "Y"}},
		{name: "empty quoted word", line: `-A X --comment "" -j Y`, want: []string{"-A", "X", "--comment", "", "-j", "Y"}},
		{name: "blank", line: "", want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, ruleFields(tc.line)); diff != "" {
				t.Errorf("ruleFields(%q) (-want +got):\n%s", tc.line, diff)
			}
		})
	}
}
