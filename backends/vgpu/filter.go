package vgpu

import (
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
)

// FilterNode reports whether the pod's containers fit the node's cards
// under the policy, with one reason per rejected card kind when they do
// not (see the Reason constants). Pods without a vGPU request fit; invalid
// requests give an Error status.
//
// Volcano filters one task on every node, then scores the nodes it fits,
// and a job's pods usually ask for the same: the latest results are kept
// (memoSlots request shapes) with the request's key and the cards'
// generation (under the fragment policy also the learned target and the
// host's and pod's CPU and memory), and reused (by ScoreNode too) while
// none of them changes.
// Statuses are never modified by their readers.
func (d *Devices) FilterNode(pod *v1.Pod, policy string) *device.Status {
	return d.FilterNodeOn(pod, policy, device.Host{})
}

// FilterNodeOn is FilterNode on a node with host free outside its cards
// (device.HostAware), which the fragment policy's card choice weighs.
func (d *Devices) FilterNodeOn(pod *v1.Pod, policy string, host device.Host) *device.Status {
	req, err := d.b.request(pod, policy)
	if err != nil {
		return device.NewStatus(device.Error, "invalid vGPU request: "+err.Error())
	}
	if req.Empty() {
		return nil
	}
	// The fragment policy's card choice also follows the host's free
	// resources, the pod's own and the learned workload: they are part of
	// the entry's identity.
	t := d.b.workload.Target()
	fi := d.fragInputsOf(req, t, host)
	m := d.memo.get(req.Key, req.Hash, d.gen, fi)
	if m == nil {
		sc, st := d.fit(req, host)
		m = &filterMemo{key: req.Key, gen: d.gen, st: st, score: sc, frag: fi}
		// Kept unless a new target was published while the cards were
		// chosen (the fragment policy's choice reads it).
		if fi.target == nil || d.b.workload.Target() == t {
			d.memo.put(m, req.Hash)
		}
	}
	if m.st != nil {
		if v := klog.V(5); v.Enabled() {
			v.InfoS("vGPU filter rejected node", "pod", klog.KObj(pod), "node", d.node, "reasons", m.st.Message())
		}
	}
	return m.st
}

// fit is FilterNode for a parsed, non-empty request: the node's score for
// the cards chosen when it fits, else why not.
func (d *Devices) fit(req *request.Pod, host device.Host) (float64, *device.Status) {
	if st := d.unservable(req); st != nil {
		return 0, st
	}
	s := scratch{host: host}
	picks, work, failed := d.choose(req, &s)
	if failed < 0 {
		return score(picks, req.NodePolicy), nil
	}
	return 0, d.explain(req, failed, work, s.forced)
}

// ScoreNode scores the node in [0, device.MaxScore] from the cards Allocate
// would choose (see score): binpack prefers nodes whose chosen cards end
// fullest, spread nodes whose chosen cards are emptiest. A pod's
// hami.io/node-scheduler-policy overrides the policy. Pods that do not fit
// or have no valid request score 0.
func (d *Devices) ScoreNode(pod *v1.Pod, policy string) float64 {
	return d.ScoreNodeOn(pod, policy, device.Host{})
}

// ScoreNodeOn is ScoreNode on a node with host free outside its cards
// (device.HostAware), which the fragment policy weighs.
func (d *Devices) ScoreNodeOn(pod *v1.Pod, policy string, host device.Host) float64 {
	if policy == PolicyFragment {
		return d.fragScoreNode(pod, host)
	}
	req, err := d.b.request(pod, policy)
	if err != nil || req.Empty() {
		return 0
	}
	if m := d.memo.get(req.Key, req.Hash, d.gen, fragInputs{}); m != nil && m.st == nil {
		return m.score
	}
	var s scratch
	picks, _, failed := d.choose(req, &s)
	if failed >= 0 {
		return 0
	}
	return score(picks, req.NodePolicy)
}

// unservable says why no choice of cards serves the request on the node:
// a container asks for more cards than it has, or init containers ask for
// cards the node's agent would not serve them.
func (d *Devices) unservable(req *request.Pod) *device.Status {
	switch {
	case d.tooFewCards(req):
		return device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewCards)
	case req.Inits > 0 && !d.initAgent:
		return device.NewStatus(device.UnschedulableAndUnresolvable, ReasonInitAgent)
	}
	return nil
}

// tooFewCards reports whether a container asks for more cards than the
// node has.
func (d *Devices) tooFewCards(req *request.Pod) bool {
	for _, c := range req.Ctrs() {
		if int(c.Nums) > len(d.cards) {
			return true
		}
	}
	return false
}

// ResultKey implements device.ResultKeyer: FilterNode and ScoreNode read the
// pod only through its parsed request, whose key encodes every field they
// use (see request.Pod.Key), plus, for a request the fragment policy
// places, the CPU and memory the pod takes on the host. Pods without a
// valid vGPU request have no key.
func (b *Backend) ResultKey(pod *v1.Pod, policy string) (string, bool) {
	req, err := b.request(pod, policy)
	if err != nil || req.Empty() {
		return "", false
	}
	if req.CardPolicy != PolicyFragment && req.NodePolicy != PolicyFragment {
		return req.Key, true
	}
	k := make([]byte, 0, len(req.Key)+24)
	k = append(append(k, req.Key...), 0)
	k = strconv.AppendInt(k, req.Host.CPUMilli, 10)
	k = strconv.AppendInt(append(k, ','), req.Host.MemMiB, 10)
	return string(k), true
}

// ResultEpoch implements device.ResultKeyer: the learned workload's
// generation, the one input of the fragment policy besides the request,
// the cards and the host's idle CPU and memory.
func (b *Backend) ResultEpoch() uint64 { return b.WorkloadGeneration() }
