package kubectlvshare

import (
	"context"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/kubectlvshare/report"
)

// Node-level reasons the plugin reports besides the backends' per-card
// ones; the first two are the scheduler's own (deviceshare.ReasonNoDevicesSuffix,
// deviceshare.ReasonBadInventorySuffix).
const (
	reasonNoDevicesSuffix    = " devices are not present on the node"
	reasonBadInventorySuffix = " device registration on the node is invalid"
	reasonCordoned           = "node is cordoned (spec.unschedulable)"
	// reasonSelector is the text of Kubernetes' node affinity filter,
	// which Volcano's predicates plugin reports.
	reasonSelector = "node(s) didn't match Pod's node affinity/selector"
)

// FitOptions are the shape `kubectl vshare fit` asks about and the
// scheduling policy.
type FitOptions struct {
	Shape  report.Shape
	Policy string
}

// Fit reports where a pod of the shape would fit now.
func (p *Plugin) Fit(ctx context.Context, o FitOptions) (*report.FitReport, error) {
	k := p.kindFor(o.Shape.Type)
	if o.Shape.Number < 1 {
		return nil, usagef("--number=%d: want 1 or more cards", o.Shape.Number)
	}
	pod := k.shape(o.Shape)
	if err := k.backend.ValidateRequest(pod); err != nil {
		return nil, usagef("the shape is not a valid %s request: %v", k.name(), err)
	}
	r := reader{c: p.clients}
	nodes, err := r.nodes(ctx, "", "")
	if err != nil {
		return nil, err
	}
	pods, err := r.pods(ctx, "")
	if err != nil {
		return nil, err
	}
	rep := &report.FitReport{TypeMeta: report.TypeMeta{APIVersion: report.APIVersion, Kind: report.KindFit}, Request: o.Shape, Device: k.name(),
		Policy: o.Policy, Nodes: []report.NodeFit{}}
	byNode := podsByNode(pods)
	for i := range nodes {
		ns := accountNode([]*kind{k}, &nodes[i], byNode[nodes[i].Name])
		nf := nodeFit(ns, k, pod, o.Policy)
		rep.Fits = rep.Fits || nf.Fits
		rep.Nodes = append(rep.Nodes, nf)
	}
	return rep, nil
}

// kindFor returns the device type `fit --type` names: an Ascend chip type
// by its commonWord or chip name, else vGPU (typ then selects card models).
func (p *Plugin) kindFor(typ string) *kind {
	var last *kind
	for _, k := range p.kinds {
		if k.shape == nil {
			continue
		}
		last = k
		if typ != "" && k.matches(typ) {
			return k
		}
	}
	return last
}

// nodeFit asks the node's devices of kind k whether the pod fits, as the
// scheduler's predicate does, and card by card why not.
func nodeFit(ns *nodeState, k *kind, pod *v1.Pod, policy string) report.NodeFit {
	nf := report.NodeFit{Name: ns.node.Name}
	var ds *deviceState
	for _, d := range ns.devices {
		if d.kind == k {
			ds = d
		}
	}
	switch {
	case ds == nil:
		nf.Reasons = []string{k.name() + reasonNoDevicesSuffix}
		return nf
	case ds.err != nil:
		nf.Reasons = []string{k.name() + reasonBadInventorySuffix + ": " + ds.err.Error()}
		return nf
	}
	st := ds.devices.FilterNode(pod, policy)
	if st.IsSuccess() {
		nf.Fits = true
		nf.Score = ds.devices.ScoreNode(pod, policy)
		nf.Chosen = chosen(ds, pod, policy)
	} else {
		nf.Reasons = st.Reasons
		if len(nf.Reasons) == 0 {
			nf.Reasons = []string{k.name() + " devices do not fit"}
		}
		nf.Resolvable = st.Code == device.Unschedulable
		nf.Cards = verdicts(ds, pod, policy)
	}
	// What keeps the pod off the node whatever its cards hold.
	var blockers []string
	if ns.node.Spec.Unschedulable {
		blockers = append(blockers, reasonCordoned)
	}
	if !labelsMatch(pod.Spec.NodeSelector, ns.node.Labels) {
		blockers = append(blockers, reasonSelector)
	}
	if len(blockers) > 0 {
		nf.Fits, nf.Score, nf.Chosen, nf.Resolvable = false, 0, nil, false
		nf.Reasons = append(blockers, nf.Reasons...)
	}
	return nf
}

// labelsMatch reports whether the node's labels carry every key and value
// of the pod's nodeSelector.
func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// chosen returns the cards Allocate takes for the pod, on a copy.
func chosen(ds *deviceState, pod *v1.Pod, policy string) []report.CardRef {
	c := ds.devices.DeepCopy()
	before := usage(c)
	if _, err := c.Allocate(pod, policy); err != nil {
		return nil
	}
	var out []report.CardRef
	for i, u := range usage(c) {
		if b := before[i]; u.Pods != b.Pods || u.MemoryUsedMiB != b.MemoryUsedMiB || u.CoresUsed != b.CoresUsed {
			out = append(out, report.CardRef{Index: u.Index, ID: u.ID})
		}
	}
	return out
}

// verdicts returns every card's verdict with what it has free, or nil when
// the device type cannot explain card by card.
func verdicts(ds *deviceState, pod *v1.Pod, policy string) []report.CardVerdict {
	e, ok := ds.devices.(device.CardExplainer)
	if !ok {
		return nil
	}
	byIndex := map[int]int{}
	for pos, u := range ds.cards {
		byIndex[u.Index] = pos
	}
	var out []report.CardVerdict
	for _, v := range e.ExplainCards(pod, policy) {
		cv := report.CardVerdict{Index: v.Index, Reason: v.Reason, Resolvable: v.Resolvable}
		if pos, ok := byIndex[v.Index]; ok {
			u := ds.cards[pos]
			cv.ID = u.ID
			cv.MemoryFreeMiB = u.MemoryTotalMiB - u.MemoryUsedMiB
			cv.CoresFree = u.CoresTotal - u.CoresUsed
		}
		out = append(out, cv)
	}
	return out
}
