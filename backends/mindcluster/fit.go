package mindcluster

import (
	"fmt"
	"strconv"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/vnpu"
)

// choice is where a request fits on a node.
type choice struct {
	chips []int
	// template is the vNPU template, after any downgrade; "" for whole
	// chips.
	template string
	// downgraded is true when the request fits only as the template with
	// one AI CPU less.
	downgraded bool
}

// FilterNode reports whether the pod fits the node's chips, with per-chip
// reasons when it does not (see fit).
func (d *Devices) FilterNode(pod *v1.Pod, policy string) *device.Status {
	if !asks(pod) {
		return nil
	}
	req, err := parseRequest(pod)
	if err != nil {
		return device.NewStatus(device.UnschedulableAndUnresolvable, "invalid "+Name+" request: "+err.Error())
	}
	_, st := d.fit(req, policy)
	return st
}

// fit chooses the chips for a request. A multiple of the node's AI cores
// per chip asks for that many whole chips: idle, healthy chips, lowest IDs
// first. Other counts ask for the vNPU template TemplateFor names, on the
// healthy chip the slicing rules admit that is fullest (binpack) or emptiest
// (spread), lowest ID on ties; when no chip admits it and the template has a
// variant with one AI CPU less, the variant is tried (MindCluster's
// downgrade). While a vNPU on the node is in flight, no other vNPU fits
// (unless Options.ConcurrentVNPUs).
func (d *Devices) fit(req request, policy string) (choice, *device.Status) {
	per := int64(d.inv.perChip)
	if req.cores%per == 0 {
		return d.fitWhole(int(req.cores / per))
	}
	if !isTemplateCores(req.cores) {
		return choice{}, device.NewStatus(device.UnschedulableAndUnresolvable, ReasonNotWholeChips)
	}
	name, err := vnpu.TemplateFor(int(req.cores), req.level, req.dvpp)
	if err != nil { // parseRequest checked the labels
		return choice{}, device.NewStatus(device.UnschedulableAndUnresolvable, "invalid "+Name+" request: "+err.Error())
	}
	if d.inflight > 0 && !d.b.concurrent {
		return choice{}, device.NewStatus(device.Unschedulable, ReasonInFlight)
	}
	if len(d.chips) == 0 {
		return choice{}, device.NewStatus(device.UnschedulableAndUnresolvable, ReasonNoFreeChips)
	}
	t, _ := d.inv.chip.Template(name)
	id, reasons := d.pick(t, policy)
	if id < 0 {
		if down, ok := vnpu.Downgrade(name); ok {
			t, _ = d.inv.chip.Template(down)
			if id, reasons = d.pick(t, policy); id >= 0 {
				return choice{chips: []int{id}, template: down, downgraded: true}, nil
			}
		}
		return choice{}, reasons.Status()
	}
	return choice{chips: []int{id}, template: name}, nil
}

// fitWhole picks n idle healthy chips, lowest IDs first.
func (d *Devices) fitWhole(n int) (choice, *device.Status) {
	if n > d.inv.totalChips {
		return choice{}, device.NewStatus(device.UnschedulableAndUnresolvable, ReasonTooFewChips)
	}
	var reasons device.CardReasons
	var idle []int
	healthy := 0
	for _, c := range d.sortedChips() {
		switch {
		case !c.healthy:
			reasons.Add(ReasonChipUnhealthy, false)
			continue
		case c.whole > 0:
			reasons.Add(ReasonChipHeldWhole, true)
		case c.slice.Instances > 0:
			reasons.Add(ReasonChipSliced, true)
		default:
			idle = append(idle, c.id)
		}
		healthy++
	}
	switch {
	case len(idle) >= n:
		return choice{chips: idle[:n]}, nil
	case len(d.chips) == 0:
		return choice{}, device.NewStatus(device.UnschedulableAndUnresolvable, ReasonNoFreeChips)
	case healthy < n:
		// Evictions cannot make up for chips the node does not offer.
		st := reasons.Status()
		st.Code = device.UnschedulableAndUnresolvable
		st.Reasons = append(st.Reasons, ReasonTooFewChips)
		return choice{}, st
	}
	return choice{}, reasons.Status()
}

// pick returns the chip for one template instance under the policy, or -1
// with the reason each chip refused.
func (d *Devices) pick(t vnpu.Template, policy string) (int, *device.CardReasons) {
	reasons := &device.CardReasons{}
	best := -1
	var bestUsed int32
	for _, c := range d.sortedChips() {
		switch {
		case !c.healthy:
			reasons.Add(ReasonChipUnhealthy, false)
			continue
		case c.whole > 0:
			reasons.Add(ReasonChipHeldWhole, true)
			continue
		}
		if conflict := c.slice.Check(d.inv.chip, t); conflict != vnpu.NoConflict {
			reasons.Add(conflictReason(conflict), true)
			continue
		}
		if !vgroupsAdmit(c.usedVGroups(), t.AICore) {
			reasons.Add(ReasonChipVGroups, true)
			continue
		}
		used := c.slice.Used.AICore
		better := used > bestUsed
		if policy == device.PolicySpread {
			better = used < bestUsed
		}
		if best < 0 || better {
			best, bestUsed = c.id, used
		}
	}
	return best, reasons
}

// vgroupsAdmit is upstream's rule for a sliced 310P chip (isChipVGroupValid):
// with vNPUs in 3 groups only 1- and 2-core vNPUs fit, with 4 only 1-core.
func vgroupsAdmit(groups int, cores int32) bool {
	switch {
	case groups >= 4:
		return cores < 2
	case groups == 3:
		return cores < 4
	}
	return true
}

func conflictReason(c vnpu.Conflict) string {
	switch c {
	case vnpu.ConflictAICore:
		return ReasonChipAICore
	case vnpu.ConflictAICPU:
		return ReasonChipAICPU
	case vnpu.ConflictMemory:
		return ReasonChipMemory
	case vnpu.ConflictDVPP:
		return ReasonChipDVPP
	case vnpu.ConflictWhole:
		return ReasonChipSliced
	}
	return fmt.Sprintf("310P chip refused the vNPU (%v)", c)
}

// ScoreNode scores a node the pod fits: the share of the node's AI cores in
// use (binpack) or free (spread), halved when the pod fits only after a
// downgrade. The plugin ranks 310P pods with BatchScore instead; this
// per-node score serves callers without a batch.
func (d *Devices) ScoreNode(pod *v1.Pod, policy string) float64 {
	req, err := parseRequest(pod)
	if err != nil {
		return 0
	}
	c, st := d.fit(req, policy)
	if !st.IsSuccess() {
		return 0
	}
	total := float64(d.inv.totalChips) * float64(d.inv.perChip)
	if total == 0 {
		return 0
	}
	free := float64(d.freeCores())
	score := device.MaxScore * (total - min(free, total)) / total
	if policy == device.PolicySpread {
		score = device.MaxScore - score
	}
	if c.downgraded {
		score /= 2
	}
	return score
}

// ResultKey implements device.ResultKeyer: FilterNode and ScoreNode read
// the pod only through its parsed request (the AI cores and the vnpu-level
// and vnpu-dvpp labels) and the policy. Pods without a valid request have
// no key. The node score Volcano ranks by is BatchScore's, which compares
// the candidates and is never kept.
func (b *Backend) ResultKey(pod *v1.Pod, policy string) (string, bool) {
	if !asks(pod) {
		return "", false
	}
	req, err := parseRequest(pod)
	if err != nil {
		return "", false
	}
	return strconv.FormatInt(req.cores, 10) + "\x00" + req.level + "\x00" + req.dvpp + "\x00" + policy, true
}

// ResultEpoch implements device.ResultKeyer: the device-info ConfigMaps
// reach a node's Devices through its inventory (a new one is new Devices),
// so nothing but the request and the node's chips decides a result.
func (b *Backend) ResultEpoch() uint64 { return 0 }
