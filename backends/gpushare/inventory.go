package gpushare

import (
	"fmt"

	v1 "k8s.io/api/core/v1"

	"github.com/vgpushare/vshare/protocol/gpushareproto"
)

// inventory is what a node advertises: its cards, their memory and health.
type inventory struct {
	cards      int
	memPerCard int64
	// unhealthy is indexed by card; nil when every card is healthy.
	unhealthy []bool
}

// capacityValue returns the node's capacity of res as an integer, whether
// it is present, and an error naming the capacity when it is not a whole
// number in [0, limit].
func capacityValue(node *v1.Node, res v1.ResourceName, limit int64) (int64, bool, error) {
	q, ok := node.Status.Capacity[res]
	if !ok {
		return 0, false, nil
	}
	v, isInt := q.AsInt64()
	if !isInt || v < 0 || v > limit {
		return 0, true, fmt.Errorf("node capacity %s=%s: want a whole number in [0, %d]", res, q.String(), limit)
	}
	return v, true, nil
}

// decodeInventory reads the node's cards. ok is false when the node has no
// cards usable in this mode: no (or zero) gpu-number, or, in share mode, no
// (or zero) gpu-memory. Inconsistent or malformed values are errors.
func decodeInventory(mode Mode, node *v1.Node) (inv inventory, ok bool, err error) {
	cards, _, err := capacityValue(node, gpushareproto.ResourceGPUNumber, gpushareproto.MaxCards)
	if err != nil {
		return inventory{}, false, err
	}
	mem, _, err := capacityValue(node, gpushareproto.ResourceGPUMemory, gpushareproto.MaxQuantity)
	if err != nil {
		return inventory{}, false, err
	}
	if cards == 0 {
		if mode == ModeShare && mem > 0 {
			return inventory{}, false, fmt.Errorf("node capacity %s=%d but %s is absent or 0: "+
				"GPU memory cannot be split into cards", gpushareproto.ResourceGPUMemory, mem, gpushareproto.ResourceGPUNumber)
		}
		return inventory{}, false, nil
	}
	if mode == ModeShare && mem == 0 {
		// A node running the GPU number node agent advertises no memory:
		// it has nothing to share.
		return inventory{}, false, nil
	}
	if mode == ModeShare && mem < cards {
		return inventory{}, false, fmt.Errorf("node capacity %s=%d is smaller than %s=%d: "+
			"want at least 1 per card", gpushareproto.ResourceGPUMemory, mem, gpushareproto.ResourceGPUNumber, cards)
	}
	inv = inventory{cards: int(cards), memPerCard: mem / cards}
	if value, found := node.Annotations[gpushareproto.AnnotationUnhealthyIDs]; found {
		if inv.unhealthy, err = gpushareproto.DecodeUnhealthy(value, inv.cards); err != nil {
			return inventory{}, false, err
		}
	}
	return inv, true, nil
}
