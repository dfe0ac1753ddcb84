package vgpu

import (
	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/backends/cardfit"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

var (
	_ device.CardExplainer   = (*Devices)(nil)
	_ device.CardDescriber   = (*Devices)(nil)
	_ device.InventoryWarner = (*Devices)(nil)
)

// InventoryWarnings returns the parts of the node's registration and
// settings left out while its cards stay usable: link scores
// (hami.io/node-nvidia-score) that cannot be read, which turn
// topology-aware placement off for the node, and card-cordon entries that
// cordon nothing (malformed, or naming no card of the node), marked
// device.IgnoredSetting.
func (d *Devices) InventoryWarnings() []error { return d.warnings }

// ExplainCards tells, card by card, why the first container that does not
// fit was refused: the same choice and the same checks as FilterNode, so
// the reasons are the ones the scheduler reports for the node.
func (d *Devices) ExplainCards(pod *v1.Pod, policy string) []device.CardVerdict {
	req := new(request.Pod)
	if err := d.b.parse(pod, policy, req); err != nil || req.Empty() {
		return nil
	}
	var s scratch
	_, work, failed := d.choose(req, &s)
	if failed < 0 {
		return nil
	}
	cr := &req.Ctrs()[failed]
	ctr, init := cr.Entry-req.Inits, cr.Entry < req.Inits
	if init {
		ctr = cr.Entry
	}
	return cardfit.Verdicts(len(work), func(i int) (reason, candidate) { return d.check(i, &work[i], cr, req) }, describe, ctr, init)
}

// CardLayouts describes the cards that are not shared by hami-core: a MIG
// card's geometry in use and the instances taken ("mig all-1g: 1g.5gb x2 of
// 7 instances", inventory.Group.Describe), "mig idle" for a MIG card holding nothing, and the mode of
// cards registered in another mode (mps).
func (d *Devices) CardLayouts() []string {
	out := make([]string, len(d.cards))
	for i := range d.cards {
		ci, c := &d.info[i], &d.cards[i]
		switch {
		case ci.mig != nil && c.migGroup < 0:
			out[i] = "mig idle"
		case ci.mig != nil:
			out[i] = ci.mig.Groups[c.migGroup].Describe(c.migUsed)
		case ci.mode != "" && ci.mode != vgpuproto.ModeHAMiCore:
			out[i] = ci.mode
		}
	}
	return out
}
