package vgpu

import (
	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/deviceshare/api"
)

// FilterNode reports whether the pod's containers fit the node's cards
// under the policy, with one reason per rejected card kind when they do
// not (see the Reason constants). Pods without a vGPU request fit; invalid
// requests give an Error status.
func (d *Devices) FilterNode(pod *v1.Pod, policy string) *api.Status {
	var req podRequest
	err := d.b.parse(pod, policy, &req)
	if err != nil {
		return api.NewStatus(api.Error, "invalid vGPU request: "+err.Error())
	}
	if req.empty() {
		return nil
	}
	sc, st := d.fit(&req)
	if st != nil {
		if v := klog.V(5); v.Enabled() {
			v.InfoS("vGPU filter rejected node", "pod", klog.KObj(pod), "node", d.node, "reasons", st.Message())
		}
		return st
	}
	// Volcano scores the nodes a task fits right after filtering them all:
	// keep the score of the cards just chosen, so ScoreNode need not choose
	// them again.
	d.memo.Store(&scoreMemo{pod: pod, uid: pod.UID, rv: pod.ResourceVersion, policy: policy, gen: d.gen,
		score: sc})
	return nil
}

// fit is FilterNode for a parsed, non-empty request: the node's score for
// the cards chosen when it fits, else why not.
func (d *Devices) fit(req *podRequest) (float64, *api.Status) {
	if d.tooFewCards(req) {
		return 0, api.NewStatus(api.UnschedulableAndUnresolvable, ReasonTooFewCards)
	}
	var s scratch
	picks, work, failed := d.choose(req, &s)
	if failed < 0 {
		return score(picks, req.nodePolicy), nil
	}
	return 0, d.explain(req, failed, work)
}

// ScoreNode scores the node in [0, api.MaxScore] from the cards Allocate
// would choose (see score): binpack prefers nodes whose chosen cards end
// fullest, spread nodes whose chosen cards are emptiest. A pod's
// hami.io/node-scheduler-policy overrides the policy. Pods that do not fit
// or have no valid request score 0.
func (d *Devices) ScoreNode(pod *v1.Pod, policy string) float64 {
	if policy == PolicyFragment {
		return d.fragScoreNode(pod)
	}
	if m := d.memo.Load(); m != nil && m.pod == pod && m.uid == pod.UID && m.rv == pod.ResourceVersion &&
		m.policy == policy && m.gen == d.gen {
		return m.score
	}
	var req podRequest
	err := d.b.parse(pod, policy, &req)
	if err != nil || req.empty() {
		return 0
	}
	var s scratch
	picks, _, failed := d.choose(&req, &s)
	if failed >= 0 {
		return 0
	}
	return score(picks, req.nodePolicy)
}

// tooFewCards reports whether a container asks for more cards than the
// node has.
func (d *Devices) tooFewCards(req *podRequest) bool {
	for _, c := range req.ctrs() {
		if int(c.nums) > len(d.cards) {
			return true
		}
	}
	return false
}
