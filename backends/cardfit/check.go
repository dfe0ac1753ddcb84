package cardfit

import "github.com/vgpushare/vshare/device"

// Reason is why a card does not fit a container. Each backend numbers its
// own, in the order its check tries them, and describes them (a function
// returning the message, one of its Reason* constants, and whether
// evicting pods could make the card fit).
type Reason uint8

// Fits is the Reason of a card that fits.
const Fits Reason = 0

// Check is a backend's check of card i against the container being placed,
// with the cards as the choice has left them so far: the Reason the card
// does not fit, or Fits and what it would take (C). Choose, explain and
// explain-by-card all run the one check, so a node is refused for the
// reasons its cards are skipped for.
type Check[C any] func(i int) (Reason, C)

// Fitting appends to cands what each of the n cards that fit would take,
// in card order.
func Fitting[C any](cands []C, n int, check Check[C]) []C {
	for i := range n {
		if r, c := check(i); r == Fits {
			cands = append(cands, c)
		}
	}
	return cands
}

// Explain checks the n cards for a container that did not fit: one reason
// per kind of card rejected (describe), and how many cards fit (too few,
// or not together: the backend says which).
func Explain[C any](n int, check Check[C], describe func(Reason) (string, bool)) (reasons device.CardReasons, fitting int) {
	for i := range n {
		r, _ := check(i)
		if r == Fits {
			fitting++
			continue
		}
		reasons.Add(describe(r))
	}
	return reasons, fitting
}

// Verdicts tells, card by card of the n, why container ctr (an init
// container when init) was refused; cards that fit have no reason.
func Verdicts[C any](n int, check Check[C], describe func(Reason) (string, bool), ctr int, init bool) []device.CardVerdict {
	out := make([]device.CardVerdict, n)
	for i := range out {
		out[i] = device.CardVerdict{Index: i, Container: ctr, InitContainer: init}
		if r, _ := check(i); r != Fits {
			out[i].Reason, out[i].Resolvable = describe(r)
		}
	}
	return out
}
