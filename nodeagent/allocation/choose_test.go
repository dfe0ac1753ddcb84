package allocation_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vgpushare/vshare/nodeagent/allocation"
)

func TestChoiceTakesTheFirstMatchAndReportsTheRest(t *testing.T) {
	pods := []*v1.Pod{pod("late", "n1", "", ""), pod("refused", "n1", "", ""), pod("early", "n1", "", ""), pod("later", "n1", "", "")}
	order := map[string]int{"early": 1, "late": 2, "later": 3}
	rec := &recorder{}
	tr := allocation.NewTracker(allocation.TrackerOptions{Node: "n1", Protocol: protocol, Patcher: rec, Kind: "test", StaleAfter: time.Minute})
	ch := allocation.NewChoice(tr, func(a, b string) bool { return order[a] < order[b] })
	for _, p := range pods {
		if _, ok := order[p.Name]; !ok {
			ch.Offer(context.Background(), p, "", errors.New("refused"))
			continue
		}
		ch.Offer(context.Background(), p, p.Name, nil)
	}
	if best, ok := ch.Chosen(); !ok || best != "early" {
		t.Errorf("Chosen = %q, %v; want early", best, ok)
	}
	if !ch.Refused() || !tr.Failed("uid-refused") {
		t.Errorf("Refused = %v, Failed(refused) = %v; want the refused pod reported and marked failed", ch.Refused(), tr.Failed("uid-refused"))
	}
	if diff := cmp.Diff([]map[string]string{{protocol.BindPhase: protocol.Failed}}, rec.patches); diff != "" {
		t.Errorf("patches (-want +got):\n%s", diff)
	}
	if _, err := ch.Err("node n1: no pod", allocation.ErrForged); err == nil || !strings.Contains(err.Error(), "(refused)") {
		t.Errorf("Err = %v, want it to name the refused pod's reason", err)
	}
	if _, ok := allocation.NewChoice[string](nil, func(a, b string) bool { return a < b }).Chosen(); ok {
		t.Error("Choice found a candidate among no pods")
	}
}

// TestChoiceCountsEachRefusalByItsClass offers one pod with each kind of
// error and checks which are marked failed and what the error says.
func TestChoiceCountsEachRefusalByItsClass(t *testing.T) {
	noPod := allocation.NewRefusal(404, "no pending pod")
	tests := []struct {
		name        string
		err         error
		wantFailed  bool
		wantRefused bool
		wantIs      error
	}{
		{name: "not for this request", err: fmt.Errorf("pod ns/p: next entry has 2 cards: %w", allocation.ErrNotForRequest)},
		{name: "not allocating", err: fmt.Errorf("pod ns/p: bind-phase success: %w", allocation.ErrNotAllocating),
			wantIs: allocation.ErrNotAllocating},
		{name: "bound elsewhere", err: fmt.Errorf("pod ns/p: bound to n2: %w", allocation.ErrNotBound), wantRefused: true,
			wantIs: allocation.ErrNotBound},
		{name: "forged", err: fmt.Errorf("pod ns/p: %w", allocation.ErrForged), wantFailed: true, wantRefused: true,
			wantIs: allocation.ErrForged},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, looking := range []bool{false, true} {
				rec := &recorder{}
				tr := allocation.NewTracker(allocation.TrackerOptions{Node: "n1", Protocol: protocol, Patcher: rec, Kind: "test",
					StaleAfter: time.Minute})
				var ch *allocation.Choice[int]
				if looking {
					ch = allocation.NewChoice[int](nil, func(a, b int) bool { return a < b })
				} else {
					ch = allocation.NewChoice(tr, func(a, b int) bool { return a < b })
				}
				ch.Offer(context.Background(), pod("p", "n1", "a", "allocating"), 0, tc.err)
				if got, want := tr.Failed("uid-p"), tc.wantFailed && !looking; got != want {
					t.Errorf("looking %v: marked failed = %v, want %v", looking, got, want)
				}
				refused, err := ch.Err("node n1: no pod", noPod)
				if refused != tc.wantRefused || ch.Refused() != tc.wantRefused {
					t.Errorf("looking %v: refused = %v (Refused %v), want %v", looking, refused, ch.Refused(), tc.wantRefused)
				}
				if want := "node n1: no pod (" + tc.err.Error() + "): no pending pod"; err == nil || !strings.HasPrefix(err.Error(), want) {
					t.Errorf("looking %v: Err = %v, want it to start with %q", looking, err, want)
				}
				if tc.wantIs != nil && !errors.Is(err, tc.wantIs) {
					t.Errorf("looking %v: Err = %v, not %v", looking, err, tc.wantIs)
				}
			}
		})
	}
}

func TestRequestAdmits(t *testing.T) {
	p := pod("p", "n1", "", "")
	if !(allocation.Request{}).Admits(p) {
		t.Error("a request with no allowed set refused a pod")
	}
	if (allocation.Request{Allow: map[types.UID]bool{"uid-q": true}}).Admits(p) {
		t.Error("a request admitted a pod not in its allowed set")
	}
	if !(allocation.Request{Allow: map[types.UID]bool{p.UID: true}}).Admits(p) {
		t.Error("a request refused a pod in its allowed set")
	}
}
