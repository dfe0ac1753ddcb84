package cardledger

import "github.com/vgpushare/vshare/device"

// Usage is what the accounted pods hold of one card. Backends embed it in
// their per-card state, next to what only they track, so the state stays
// one value that copies with the card slice.
type Usage struct {
	// UsedMiB is the memory held, in MiB.
	UsedMiB int64
	// UsedCores is the cores held, in the backend's unit (percent of the
	// card's SMs or AI cores, or AI cores of a vNPU template).
	UsedCores int32
	// UsedNum counts the holders: one per container holding the card.
	UsedNum int32
}

// Take adds (sign 1) or gives back (sign -1) one holder of mem MiB and
// cores: Take(m, c, 1) followed by Take(m, c, -1) leaves u as it was.
func (u *Usage) Take(mem int64, cores, sign int32) {
	u.UsedMiB += int64(sign) * mem
	u.UsedCores += sign * cores
	u.UsedNum += sign
}

// Card is what the per-card metrics report of a card besides its usage.
type Card struct {
	// ID identifies the card on its node (a UUID, or an index).
	ID string
	// Type is the card model as registered; empty when unknown.
	Type    string
	Healthy bool
	// MemMiB and Cores are the card's capacity, Cores in the unit of
	// Usage.UsedCores.
	MemMiB int64
	Cores  int32
	// MaxPods is the most holders the card takes (0: not modelled).
	MaxPods int32
	// Cordoned cards are skipped for new pods (a node annotation).
	Cordoned bool
}

// Report returns n cards' usage for device.CardReporter; card(i) describes
// card i and says what it holds.
func Report(n int, card func(i int) (Card, Usage)) []device.CardUsage {
	out := make([]device.CardUsage, n)
	for i := range out {
		c, u := card(i)
		out[i] = device.CardUsage{ID: c.ID, Index: i, Type: c.Type, Healthy: c.Healthy,
			MemoryUsedMiB: u.UsedMiB, MemoryTotalMiB: c.MemMiB,
			CoresUsed: int64(u.UsedCores), CoresTotal: int64(c.Cores),
			Pods: int(u.UsedNum), MaxPods: int(c.MaxPods), Cordoned: c.Cordoned}
	}
	return out
}

// Used returns u. Card states embed Usage, so Used lets CardUsage read it
// from any of them.
func (u Usage) Used() Usage { return u }
