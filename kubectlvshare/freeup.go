package kubectlvshare

import (
	"cmp"
	"slices"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/device"
	"github.com/vgpushare/vshare/kubectlvshare/report"
)

// freeUp finds a small set of pods on the node whose cards, freed, would
// let the pod fit: for each card, its holders largest first until the pod
// fits, and all the node's holders largest first; each set is then pruned
// (a pod whose cards are not needed is put back) and the smallest kept (by
// pods, then memory). ok is false when freeing every pod would not help.
// It works on copies of the node's Devices with the backend's own
// SubResource and FilterNode, so it is the scheduler's idea of "fits".
func freeUp(ds *deviceState, pod *v1.Pod, policy string) (report.FreeUp, bool) {
	var sets [][]podHolding
	byMem := func(hs []podHolding) {
		slices.SortStableFunc(hs, func(a, b podHolding) int { return cmp.Compare(heldMemory(b), heldMemory(a)) })
	}
	for pos := range ds.cards {
		var hs []podHolding
		for _, h := range ds.holdings {
			if slices.ContainsFunc(h.cards, func(c cardShare) bool { return c.pos == pos }) {
				hs = append(hs, h)
			}
		}
		byMem(hs)
		sets = append(sets, hs)
	}
	all := slices.Clone(ds.holdings)
	byMem(all)
	sets = append(sets, all)

	var best []podHolding
	found := false
	for _, candidates := range sets {
		set, ok := freeing(ds.devices, pod, policy, candidates)
		if !ok {
			continue
		}
		if !found || len(set) < len(best) || (len(set) == len(best) && totalMemory(set) < totalMemory(best)) {
			best, found = set, true
		}
	}
	if !found || len(best) == 0 {
		return report.FreeUp{}, false
	}
	f := report.FreeUp{Device: ds.kind.name(), Pods: []report.CardHolder{}, Cards: []report.CardRef{}}
	seen := map[int]bool{}
	for _, h := range best {
		ch := report.CardHolder{Namespace: h.pod.Namespace, Name: h.pod.Name}
		for _, c := range h.cards {
			ch.MemoryMiB += c.memMiB
			ch.Cores += c.cores
			if !seen[c.pos] {
				seen[c.pos] = true
				u := ds.cards[c.pos]
				f.Cards = append(f.Cards, report.CardRef{Index: u.Index, ID: u.ID})
			}
		}
		f.Pods = append(f.Pods, ch)
	}
	slices.SortFunc(f.Cards, func(a, b report.CardRef) int { return cmp.Compare(a.Index, b.Index) })
	return f, true
}

// freeing removes candidates in order from a copy of d until the pod fits,
// then puts back each one the fit does not need. ok is false when the pod
// does not fit with every candidate removed.
func freeing(d device.Devices, pod *v1.Pod, policy string, candidates []podHolding) ([]podHolding, bool) {
	c := d.DeepCopy()
	n := 0
	for !c.FilterNode(pod, policy).IsSuccess() {
		if n == len(candidates) {
			return nil, false
		}
		if err := c.SubResource(candidates[n].pod); err != nil {
			return nil, false
		}
		n++
	}
	var set []podHolding
	for i := n - 1; i >= 0; i-- {
		h := candidates[i]
		if err := c.AddResource(h.pod); err == nil && c.FilterNode(pod, policy).IsSuccess() {
			continue
		}
		_ = c.SubResource(h.pod)
		set = append(set, h)
	}
	slices.Reverse(set)
	return set, true
}

func heldMemory(h podHolding) int64 {
	var m int64
	for _, c := range h.cards {
		m += c.memMiB
	}
	return m
}

func totalMemory(hs []podHolding) int64 {
	var m int64
	for _, h := range hs {
		m += heldMemory(h)
	}
	return m
}
