package vgpu

import (
	"slices"

	"github.com/vgpushare/vshare/backends/cardledger"
	"github.com/vgpushare/vshare/backends/vgpu/request"
	"github.com/vgpushare/vshare/protocol/vgpuproto"
)

// phases is the pod's own use of the cards during a phased choice: per
// phase (vgpuproto.Spans: one per regular init container, then the regular
// containers'), per card, what the containers placed so far hold there.
type phases struct {
	n     int
	cards int
	use   []cardledger.Usage // n x cards, phase-major
}

func (p *phases) at(phase, card int) *cardledger.Usage { return &p.use[phase*p.cards+card] }

// peak is the most the pod holds of card in the phases of span, each of
// memory, cores and holders on its own (what vgpuproto.Peak charges).
func (p *phases) peak(span vgpuproto.Span, card int) cardledger.Usage {
	var out cardledger.Usage
	for ph := span.First; ph <= span.Last; ph++ {
		u := p.at(ph, card)
		out.UsedMiB, out.UsedCores, out.UsedNum = max(out.UsedMiB, u.UsedMiB), max(out.UsedCores, u.UsedCores), max(out.UsedNum, u.UsedNum)
	}
	return out
}

// choosePhased is choose for a pod whose init containers ask for cards
// (req.Inits > 0). Each container is checked against the cards as other
// pods hold them (d.cards) plus what the pod's containers placed before it
// hold in the phases it runs in, at the most (the node must have room for
// the pod at its peak, vgpuproto.Peak). A MIG instance counts in every
// phase. A container after a regular init container that asks for cards
// gets that container's cards first, as the kubelet gives it those
// devices again (request/init.go; checkReuse made sure it asks for at least as
// many), and chooses only the rest; with nvidia.com/numa-bind the rest
// come from the same NUMA node. When such a card does not fit, s.forced
// names the cards the failed container had to take, for explain.
func (d *Devices) choosePhased(req *request.Pod, s *scratch) (picks []pick, work []cardState, failed int) {
	n := len(d.cards)
	work = append(s.workBuf[:0], d.cards...) // MIG positions of every phase
	eff := make([]cardState, n)
	spans, nph := vgpuproto.Spans(req.Roles)
	ph := phases{n: nph, cards: n, use: make([]cardledger.Usage, nph*n)}
	all := vgpuproto.Span{First: 0, Last: nph - 1}
	picks = s.pickBuf[:0]
	var reusable []int32
	ctrs := req.Ctrs()
	// stateFor is the cards as container m finds them.
	stateFor := func(m *request.Container, out []cardState) []cardState {
		for i := range out {
			out[i] = work[i]
			sp := spans[m.Entry]
			if d.info[i].mig != nil {
				sp = all // only MIG instances there, in every phase
			}
			pk := ph.peak(sp, i)
			out[i].UsedMiB += pk.UsedMiB
			out[i].UsedCores += pk.UsedCores
			out[i].UsedNum += pk.UsedNum
		}
		return out
	}
	var ahead []chained
	for f := range ctrs {
		cr := &ctrs[f]
		span := spans[cr.Entry]
		stateFor(cr, eff)
		// A regular init container's cards go to the containers after it
		// until a sidecar or regular container takes them: each must fit
		// there too, in its own phase (they never run together).
		ahead = ahead[:0]
		for m := f + 1; cr.Role == vgpuproto.RoleInit && m < len(ctrs); m++ {
			ahead = append(ahead, chained{cr: ctrs[m], state: stateFor(&ctrs[m], make([]cardState, n))})
			if ctrs[m].Role != vgpuproto.RoleInit {
				break
			}
		}
		sel, ok := d.selectPhased(req, cr, eff, reusable, ahead, s)
		if !ok {
			s.forced = reusable
			return picks, eff, f
		}
		for _, c := range sel {
			w := &work[c.card]
			sp := span
			if c.migPos >= 0 {
				w.migGroup = c.migGroup
				w.migUsed |= 1 << uint(c.migPos)
				sp = all
			}
			for p := sp.First; p <= sp.Last; p++ {
				u := ph.at(p, int(c.card))
				u.UsedMiB += c.mem
				u.UsedCores += cr.Cores
				u.UsedNum++
			}
			picks = append(picks, pick{candidate: c, ctr: int32(cr.Entry), cores: cr.Cores})
		}
		if cr.Role == vgpuproto.RoleInit {
			reusable = reusable[:0:0]
			for _, c := range sel {
				reusable = append(reusable, c.card)
			}
		} else {
			reusable = nil
		}
	}
	// On success work is the cards as the pod leaves them at its peak
	// (the fragment policy measures it).
	for i := range work {
		pk := ph.peak(all, i)
		work[i].UsedMiB += pk.UsedMiB
		work[i].UsedCores += pk.UsedCores
		work[i].UsedNum += pk.UsedNum
	}
	return picks, work, -1
}

// chained is a container that will get the cards of the container being
// placed, with the cards as it finds them.
type chained struct {
	cr    request.Container // a copy: a pointer into req would move every request to the heap
	state []cardState
}

// selectPhased picks container cr's cards on the cards' state eff: every
// card of reusable, which must fit, then the best of the others for the
// rest under the request's policies, among the cards that fit every
// container of ahead too. (A MIG card's check for ahead does not count
// the instance cr takes.)
func (d *Devices) selectPhased(req *request.Pod, cr *request.Container, eff []cardState, reusable []int32, ahead []chained, s *scratch) ([]candidate, bool) {
	out := make([]candidate, 0, cr.Nums)
	numa := int32(-2)
	for _, card := range reusable {
		code, c := d.check(int(card), &eff[card], cr, req)
		if code != fits {
			return nil, false
		}
		out = append(out, c)
		numa = c.numa
	}
	k := int(cr.Nums) - len(out)
	if k == 0 {
		return out, true
	}
	cands := s.candBuf[:0]
	for i := range eff {
		if slices.Contains(reusable, int32(i)) {
			continue
		}
		code, c := d.check(i, &eff[i], cr, req)
		if code != fits || (req.NUMABind && numa != -2 && c.numa != numa) || !fitsAhead(d, req, i, ahead) {
			continue
		}
		cands = append(cands, c)
	}
	if req.CardPolicy == PolicyFragment && k == 1 && len(out) == 0 {
		d.fragRank(cr, eff, cands, s.host)
	}
	sel := d.selectCards(req, cands, k, s.selBuf[:0])
	if sel == nil {
		return nil, false
	}
	for _, i := range sel {
		out = append(out, cands[i])
	}
	return out, true
}

// fitsAhead reports whether card i fits every container of ahead.
func fitsAhead(d *Devices, req *request.Pod, i int, ahead []chained) bool {
	for _, a := range ahead {
		if code, _ := d.check(i, &a.state[i], &a.cr, req); code != fits {
			return false
		}
	}
	return true
}
