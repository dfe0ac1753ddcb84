package vgpu

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"
	"k8s.io/klog/v2"

	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
)

// prep is the backend's device.Prepared: a pod's request as parse read it
// under a policy, and the parse error.
type prep struct {
	req    request.Pod
	policy string
	err    error
}

// Prepare implements device.Preparer: the pod's request under the policy,
// read once per task for the plugin to hand to every node's Fit.
func (b *Backend) Prepare(pod *v1.Pod, policy string) (device.Prepared, error) {
	p := &prep{policy: policy}
	p.err = b.parse(pod, policy, &p.req)
	return p, p.err
}

// prepared is req as this backend prepared it; a Prepared of another
// backend is a programming error, reported as the request's error.
func prepared(req device.Prepared) *prep {
	if p, ok := req.(*prep); ok {
		return p
	}
	return &prep{err: fmt.Errorf("prepared request %T was not prepared by the %s backend", req, Name)}
}

// FilterNode reports whether the pod's containers fit the node's cards
// under the policy, with one reason per rejected card kind when they do
// not (see the Reason constants). Pods without a vGPU request fit; invalid
// requests give an Error status. Statuses are never modified by their
// readers.
//
// Nothing is kept between calls: the plugin prepares a task's request once
// (Prepare) and keeps each node's results itself (Fit, ResultKey).
func (d *Devices) FilterNode(pod *v1.Pod, policy string) *device.Status {
	p, _ := d.b.Prepare(pod, policy)
	_, st := d.Fit(pod, p, device.Host{})
	return st
}

// ScoreNode scores the node in [0, device.MaxScore] from the cards Allocate
// would choose (see score): binpack prefers nodes whose chosen cards end
// fullest, spread nodes whose chosen cards are emptiest, fragment the
// least fragmentation left (fragScore). A pod's hami.io/node-scheduler-policy
// overrides the policy. Pods that do not fit or have no valid request
// score 0, but under the fragment policy a pod without vGPUs scores how
// little its CPU and memory strand the node's cards.
func (d *Devices) ScoreNode(pod *v1.Pod, policy string) float64 {
	p, _ := d.b.Prepare(pod, policy)
	sc, _ := d.Fit(pod, p, device.Host{})
	return sc
}

// Fit implements device.Fitter: FilterNode's status and, when the pod
// fits, ScoreNode's score, from one choice of cards, on a node with host
// free outside its cards, which the fragment policy's card choice and
// score weigh.
func (d *Devices) Fit(pod *v1.Pod, req device.Prepared, host device.Host) (float64, *device.Status) {
	p := prepared(req)
	if p.err != nil {
		return 0, device.NewStatus(device.Error, "invalid vGPU request: "+p.err.Error())
	}
	if p.req.Empty() {
		if p.policy == PolicyFragment {
			return d.bareFragScore(&p.req, host), nil
		}
		return 0, nil
	}
	sc, st := d.fit(&p.req, host)
	if st != nil {
		if v := klog.V(5); v.Enabled() {
			v.InfoS("vGPU filter rejected node", "pod", klog.KObj(pod), "node", d.node, "reasons", st.Message())
		}
	}
	return sc, st
}

// fit is Fit for a parsed, non-empty request: the node's score for the
// cards chosen when it fits, else why not.
func (d *Devices) fit(req *request.Pod, host device.Host) (float64, *device.Status) {
	if st := d.unservable(req); st != nil {
		return 0, st
	}
	s := scratch{host: host}
	picks, work, failed := d.choose(req, &s)
	if failed >= 0 {
		return 0, d.explain(req, failed, work, s.forced)
	}
	if req.NodePolicy == PolicyFragment {
		return d.fragScore(req, picks, work, host), nil
	}
	return score(picks, req.NodePolicy), nil
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
// valid vGPU request have no key. Two pods of one key prepare to requests
// equal but for Host where no fragment policy reads it (device.Preparer):
// the plugin shares one between them.
func (b *Backend) ResultKey(pod *v1.Pod, policy string) (string, bool) {
	var req request.Pod
	if err := b.parse(pod, policy, &req); err != nil || req.Empty() {
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
