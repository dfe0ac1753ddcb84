package allocation_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

func TestBestTakesTheFirstMatchAndReportsTheRest(t *testing.T) {
	pods := []*v1.Pod{pod("late", "n1", "", ""), pod("refused", "n1", "", ""), pod("early", "n1", "", ""), pod("later", "n1", "", "")}
	order := map[string]int{"early": 1, "late": 2, "later": 3}
	var missed []string
	best, ok := allocation.Best(pods,
		func(p *v1.Pod) (string, error) {
			if _, ok := order[p.Name]; !ok {
				return "", errors.New("refused")
			}
			return p.Name, nil
		},
		func(a, b string) bool { return order[a] < order[b] },
		func(p *v1.Pod, err error) { missed = append(missed, p.Name+": "+err.Error()) })
	if !ok || best != "early" {
		t.Errorf("Best = %q, %v; want early", best, ok)
	}
	if diff := cmp.Diff([]string{"refused: refused"}, missed); diff != "" {
		t.Errorf("missed (-want +got):\n%s", diff)
	}
	if _, ok := allocation.Best(nil, func(*v1.Pod) (string, error) { return "", nil }, func(a, b string) bool { return a < b },
		func(*v1.Pod, error) {}); ok {
		t.Error("Best found a candidate among no pods")
	}
}
