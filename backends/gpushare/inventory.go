package gpushare

import (
	"fmt"
	"strconv"
	"strings"

	v1 "k8s.io/api/core/v1"
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
	cards, _, err := capacityValue(node, ResourceGPUNumber, MaxCards)
	if err != nil {
		return inventory{}, false, err
	}
	mem, _, err := capacityValue(node, ResourceGPUMemory, MaxQuantity)
	if err != nil {
		return inventory{}, false, err
	}
	if cards == 0 {
		if mode == ModeShare && mem > 0 {
			return inventory{}, false, fmt.Errorf("node capacity %s=%d but %s is absent or 0: "+
				"GPU memory cannot be split into cards", ResourceGPUMemory, mem, ResourceGPUNumber)
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
			"want at least 1 per card", ResourceGPUMemory, mem, ResourceGPUNumber, cards)
	}
	inv = inventory{cards: int(cards), memPerCard: mem / cards}
	if value, found := node.Annotations[AnnotationUnhealthyIDs]; found {
		if inv.unhealthy, err = parseUnhealthy(value, inv.cards); err != nil {
			return inventory{}, false, err
		}
	}
	return inv, true, nil
}

// parseUnhealthy decodes volcano.sh/gpu-unhealthy-ids. Spaces around
// entries, empty entries and repeated indices are tolerated; an entry that
// is not a card index of this node is an error, because a list that cannot
// be read (or that names cards the node does not have) cannot be trusted to
// tell which cards are healthy.
func parseUnhealthy(value string, cards int) ([]bool, error) {
	var out []bool
	for _, entry := range strings.Split(value, ",") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		id, ok := parseCardIndex(entry)
		if !ok || id >= cards {
			return nil, fmt.Errorf("annotation %s=%q: entry %q is not a card index of this node; "+
				"want comma-separated indices in [0, %d]", AnnotationUnhealthyIDs, value, entry, cards-1)
		}
		if out == nil {
			out = make([]bool, cards)
		}
		out[id] = true
	}
	return out, nil
}

// parseCardIndex parses a non-negative decimal index in the form
// strconv.Itoa writes it (digits only, no sign, spaces or leading zeros), so
// that one card has one spelling and an accounted value reads back as
// written.
func parseCardIndex(s string) (int, bool) {
	if s == "" || len(s) > 9 || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	v, err := strconv.Atoi(s)
	return v, err == nil
}
