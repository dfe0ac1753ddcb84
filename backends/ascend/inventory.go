package ascend

import (
	"fmt"

	"github.com/vgpushare/vshare/protocol/ascendproto"
)

// cardSpec is one decoded card.
type cardSpec struct {
	id         string
	typ        string
	count      int32
	memMiB     int64
	coresTotal int32
	numa       int32
	healthy    bool
	// network is the card's NetworkID (custominfo.NetworkID, Ascend910
	// chips); hasNetwork is false when the card has none.
	network    int64
	hasNetwork bool
	// cordoned cards are skipped for new pods (hami.io/device-cordon).
	cordoned bool
}

// decodeRegister reads hami.io/node-register-<commonWord>. An empty value
// or list registers no card.
func (b *Backend) decodeRegister(value string) ([]cardSpec, error) {
	registered, err := ascendproto.DecodeRegister(value)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", b.keys.Register, err)
	}
	cards := make([]cardSpec, len(registered))
	for i, r := range registered {
		cards[i] = cardSpec{id: r.ID, typ: r.Type, count: r.Count, memMiB: r.DevmemMiB, coresTotal: r.Devcore,
			numa: int32(r.NUMA), healthy: r.Healthy}
		if r.NetworkID != nil {
			cards[i].network, cards[i].hasNetwork = *r.NetworkID, true
		}
	}
	return cards, nil
}
