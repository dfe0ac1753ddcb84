package ascend

import (
	"slices"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/device"
)

var (
	_ device.CardExplainer = (*Devices)(nil)
	_ device.CardDescriber = (*Devices)(nil)
)

// ExplainCards tells, card by card, why the first container that does not
// fit was refused: the same choice and checks as FilterNode.
func (d *Devices) ExplainCards(pod *v1.Pod, policy string) []device.CardVerdict {
	var req podRequest
	if err := d.b.parse(pod, &req); err != nil || len(req.ctrs) == 0 {
		return nil
	}
	_, work, failed := d.choose(&req, policy)
	if failed < 0 {
		return nil
	}
	cr := &req.ctrs[failed]
	return cardfit.Verdicts(len(work), func(i int) (reason, candidate) { return d.check(i, &work[i], cr, &req) }, describe, cr.ctr, false)
}

// CardLayouts lists, on a node that slices by templates, the vNPU
// templates each card holds ("vir05_1c_16g x2, whole chip x1" sorted by
// name); cards of a hami-core node, and idle cards, are "".
func (d *Devices) CardLayouts() []string {
	out := make([]string, len(d.cards))
	if d.soft {
		return out
	}
	counts := make([]map[string]int, len(d.cards))
	cardledger.Each(d.ledger, func(h *holding) {
		for _, u := range h.uses {
			if u.tmpl == tmplNone {
				continue
			}
			name := "whole chip"
			if u.tmpl >= 0 {
				name = d.templates[u.tmpl].Name
			}
			if counts[u.card] == nil {
				counts[u.card] = map[string]int{}
			}
			counts[u.card][name]++
		}
	})
	for i, m := range counts {
		names := make([]string, 0, len(m))
		for name, n := range m {
			names = append(names, name+" x"+strconv.Itoa(n))
		}
		slices.Sort(names)
		out[i] = strings.Join(names, ", ")
	}
	return out
}

var _ device.InventoryWarner = (*Devices)(nil)

// InventoryWarnings returns the node's hami.io/device-cordon entries that
// cordon nothing (malformed, or naming no card of this chip type).
func (d *Devices) InventoryWarnings() []error { return d.warnings }
