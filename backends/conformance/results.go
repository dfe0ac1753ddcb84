package conformance

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
)

// resultDraws is how many pods the result-key check draws per node state.
const resultDraws = 96

// checkResultKeys checks a device.ResultKeyer's promise, on which the
// plugin keeps one result per key and node for a whole session: two pods
// with the same key get the same FilterNode status (code and reasons) and
// ScoreNode score on the same node, in every state the check visits (a
// fresh node and partly filled ones), and a pod's key and the epoch do not
// change while nothing does. Pods drawn from Suite.Pod with the same
// request under another name share a key; a key that leaves out a field
// the results read shows as two pods of one key with different results.
func checkResultKeys(tb testing.TB, s Suite, policy string, salt uint64) {
	tb.Helper()
	rk, ok := s.Backend.(device.ResultKeyer)
	if !ok {
		return
	}
	e := newEnv(tb, s, salt)
	states := []device.Devices{e.devices(tb)}
	for i := 0; i < 3; i++ {
		d, _ := e.partlyFilled(tb, policy)
		states = append(states, d)
	}
	keyed := 0
	for si, d := range states {
		epoch := rk.ResultEpoch()
		seen := map[string]keyedResult{}
		for i := 0; i < resultDraws; i++ {
			p := e.pod(tb)
			key, ok := rk.ResultKey(p, policy)
			if !ok {
				continue
			}
			keyed++
			if again, ok2 := rk.ResultKey(p.DeepCopy(), policy); !ok2 || again != key {
				tb.Fatalf("state %d: ResultKey of pod %s = %q, then %q (ok %v) for a copy: want the same", si, p.Name, key, again, ok2)
			}
			got := resultOf(d, p, policy)
			if first, ok := seen[key]; ok && first.result != got {
				tb.Fatalf("state %d (%s): pods %s and %s share the key %q but get different results:\n  %s: %s\n  %s: %s",
					si, d.GetStatus(), first.pod, p.Name, key, first.pod, first.result, p.Name, got)
			} else if !ok {
				seen[key] = keyedResult{pod: p.Name, result: got}
			}
			// Another pod with the same request: same key, same result.
			twin := p.DeepCopy()
			name(twin, p.Name+"-twin")
			if k, _ := rk.ResultKey(twin, policy); k != key {
				tb.Fatalf("pod %s and its twin %s ask for the same but have the keys %q and %q", p.Name, twin.Name, key, k)
			}
		}
		if rk.ResultEpoch() != epoch {
			tb.Errorf("state %d: ResultEpoch moved from %d to %d while only FilterNode, ScoreNode and ResultKey ran", si, epoch, rk.ResultEpoch())
		}
	}
	if keyed == 0 {
		tb.Fatalf("the backend is a device.ResultKeyer but gave none of %d pods from Suite.Pod a key", resultDraws*len(states))
	}
}

type keyedResult struct {
	pod    string
	result string
}

// resultOf renders FilterNode's status and ScoreNode's score of the pod on d.
func resultOf(d device.Devices, p *v1.Pod, policy string) string {
	st := d.FilterNode(p, policy)
	if st.IsSuccess() {
		return fmt.Sprintf("fits, score %v", d.ScoreNode(p, policy))
	}
	reasons := slices.Clone(st.Reasons)
	slices.Sort(reasons)
	return fmt.Sprintf("code %d: %s", st.Code, strings.Join(reasons, "; "))
}
