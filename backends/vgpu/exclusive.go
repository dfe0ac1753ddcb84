package vgpu

import (
	"math/bits"
	"slices"
	"strconv"

	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// Label-based exclusive cards (the plugin argument
// deviceshare.GPUExclusiveRules), with upstream's semantics: volcano-sh/
// volcano pull request #5213, pkg/scheduler/plugins/deviceshare/
// gpuexclusive.go.
//
//   - A pod matches a rule when it carries every label of the rule; it may
//     match several.
//   - A matching pod is kept off every card that holds a pod matching one
//     of the same rules (upstream's reservedGPUsForPod: the union of the
//     cards of the pod's rules). Pods matching different rules may share a
//     card.
//   - Pods matching no rule are not constrained, and a matching pod may
//     share a card with them: the rules keep rule-matching pods apart from
//     each other, not from everyone (the reviewer's reading of #5213).
//   - Only hami-core cards are kept apart: upstream skips nodes in another
//     mode, MIG instances being isolated in hardware. Here the test is per
//     card (a node may mix modes).
//
// Upstream rebuilds which card holds which rule at every session from the
// pods' labels and allocation annotations, plus an in-memory map of its own
// allocations kept in the plugin value (which Volcano builds again every
// session). Here the rules a pod matches (request.Parser.RuleMask) are part of what the ledger
// accounts for it (holding.rules, counted per card in cardState.excl), so
// pods bound before a scheduler restart, pods whose bind is in flight
// (the ledger's assumptions) and pods placed earlier in the same session
// all count, and releasing a pod gives back exactly what it took.

// exclusiveApplies reports whether the rules keep pods apart on the card:
// hami-core cards only (see above).
func (ci *cardInfo) exclusiveApplies() bool {
	return ci.mode == "" || ci.mode == vgpuproto.ModeHAMiCore
}

// holdsRule reports whether the card holds a pod matching one of the rules
// in mask.
func (c *cardState) holdsRule(mask uint64) bool {
	for m := mask; m != 0; m &= m - 1 {
		i := bits.TrailingZeros64(m)
		if i < len(c.excl) && c.excl[i] > 0 {
			return true
		}
	}
	return false
}

// addRules returns a new per-rule holder count with each rule of mask
// changed by sign; nil when no rule is held.
func addRules(excl []int32, mask uint64, sign int32) []int32 {
	n := 64 - bits.LeadingZeros64(mask)
	out := slices.Clone(excl)
	if len(out) < n {
		out = append(out, make([]int32, n-len(out))...)
	}
	for m := mask; m != 0; m &= m - 1 {
		out[bits.TrailingZeros64(m)] += sign
	}
	for len(out) > 0 && out[len(out)-1] <= 0 {
		out = out[:len(out)-1]
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// rulesStatus renders the rules a card holds for GetStatus: "rules [0x2 3x1]".
func rulesStatus(excl []int32) string {
	s := ", rules ["
	sep := ""
	for i, n := range excl {
		if n > 0 {
			s += sep + strconv.Itoa(i) + "x" + strconv.Itoa(int(n))
			sep = " "
		}
	}
	return s + "]"
}
