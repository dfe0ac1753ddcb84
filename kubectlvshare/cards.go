package kubectlvshare

import (
	"context"
	"errors"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/kubectlvshare/report"
)

// CardsOptions select the nodes of `kubectl vshare cards`.
type CardsOptions struct {
	// Node is one node's name; Selector a label selector over nodes.
	Node, Selector string
}

// Cards reads the selected nodes and every pod, and reports each card.
func (p *Plugin) Cards(ctx context.Context, o CardsOptions) (*report.CardReport, error) {
	r := reader{c: p.clients}
	nodes, err := r.nodes(ctx, o.Node, o.Selector)
	if err != nil {
		return nil, err
	}
	pods, err := r.pods(ctx, "")
	if err != nil {
		return nil, err
	}
	return cardReport(p.kinds, nodes, pods), nil
}

// cardReport accounts the pods on the nodes and reports every card.
func cardReport(kinds []*kind, nodes []v1.Node, pods []v1.Pod) *report.CardReport {
	rep := &report.CardReport{TypeMeta: report.TypeMeta{APIVersion: report.APIVersion, Kind: report.KindCards}, Nodes: []report.NodeCards{}, Totals: []report.Totals{}}
	byNode := podsByNode(pods)
	for i := range nodes {
		ns := accountNode(kinds, &nodes[i], byNode[nodes[i].Name])
		nc := nodeCards(ns)
		rep.Nodes = append(rep.Nodes, nc)
		for _, t := range nc.Totals {
			rep.Totals = addTotals(rep.Totals, t)
		}
	}
	return rep
}

// nodeCards reports one accounted node.
func nodeCards(ns *nodeState) report.NodeCards {
	nc := report.NodeCards{Name: ns.node.Name, Cordoned: ns.node.Spec.Unschedulable, Cards: []report.Card{}, Totals: []report.Totals{}}
	for _, ds := range ns.devices {
		name := ds.kind.name()
		if ds.err != nil {
			nc.Errors = append(nc.Errors, report.Problem{Node: nc.Name, Device: name, Message: ds.err.Error()})
			continue
		}
		for _, w := range ds.warnings {
			// A part left out: unreadable link scores (the cards are
			// listed, the part is an error) or an operator's setting
			// partly ignored (a cordon entry naming no card).
			var setting device.IgnoredSetting
			nc.Errors = append(nc.Errors, report.Problem{Node: nc.Name, Device: name, Message: w.Error(), Setting: errors.As(w, &setting)})
		}
		for _, pp := range ds.problems {
			nc.Errors = append(nc.Errors, report.Problem{Node: nc.Name, Device: name, Pod: podKey(pp.pod), Message: pp.err.Error()})
		}
		t := report.Totals{Device: name}
		pods := map[string]bool{}
		for pos, u := range ds.cards {
			c := report.Card{Device: name, Index: u.Index, ID: u.ID, Model: u.Type, Healthy: u.Healthy, Cordoned: u.Cordoned,
				MemoryUsedMiB: u.MemoryUsedMiB, MemoryTotalMiB: u.MemoryTotalMiB, CoresUsed: u.CoresUsed, CoresTotal: u.CoresTotal,
				Shares: u.Pods, MaxShares: u.MaxPods, Layout: ds.layouts[pos], Pods: []report.CardHolder{}}
			for _, h := range ds.holders(pos) {
				c.Pods = append(c.Pods, report.CardHolder{Namespace: h.pod.Namespace, Name: h.pod.Name, MemoryMiB: h.share.memMiB, Cores: h.share.cores})
				pods[podKey(h.pod)] = true
			}
			nc.Cards = append(nc.Cards, c)
			t.Cards++
			if c.Idle() {
				t.IdleCards++
			}
			t.MemoryUsedMiB += c.MemoryUsedMiB
			t.MemoryTotalMiB += c.MemoryTotalMiB
			t.CoresUsed += c.CoresUsed
			t.CoresTotal += c.CoresTotal
			t.Shares += c.Shares
		}
		t.Pods = len(pods)
		nc.Totals = append(nc.Totals, t)
	}
	return nc
}

// podKey is "namespace/name".
func podKey(p *v1.Pod) string { return p.Namespace + "/" + p.Name }

// addTotals adds t to the entry of its device type.
func addTotals(all []report.Totals, t report.Totals) []report.Totals {
	for i := range all {
		if all[i].Device == t.Device {
			a := &all[i]
			a.Cards += t.Cards
			a.IdleCards += t.IdleCards
			a.MemoryUsedMiB += t.MemoryUsedMiB
			a.MemoryTotalMiB += t.MemoryTotalMiB
			a.CoresUsed += t.CoresUsed
			a.CoresTotal += t.CoresTotal
			a.Shares += t.Shares
			a.Pods += t.Pods
			return all
		}
	}
	return append(all, t)
}
