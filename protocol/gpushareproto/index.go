package gpushareproto

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// DecodeIndex reads a volcano.sh/gpu-index value: exactly want distinct card
// indices in [0, cards), comma-separated, each written as EncodeIndex
// writes it (digits only). Errors name the annotation, the value and what
// is allowed.
func DecodeIndex(value string, want int64, cards int) ([]int, error) {
	if want > int64(cards) {
		return nil, fmt.Errorf("annotation %s=%q: the pod asks for %d cards but the node has %d",
			AnnotationGPUIndex, value, want, cards)
	}
	if value == "" {
		return nil, fmt.Errorf("annotation %s=%q is empty; want %d comma-separated card indices in [0, %d]",
			AnnotationGPUIndex, value, want, cards-1)
	}
	if n := int64(strings.Count(value, ",") + 1); n != want {
		return nil, fmt.Errorf("annotation %s=%q lists %d cards; want %d (the pod's request)",
			AnnotationGPUIndex, value, n, want)
	}
	out := make([]int, 0, want)
	for rest := value; ; {
		entry, tail, more := strings.Cut(rest, ",")
		id, ok := parseCardIndex(entry)
		if !ok || id >= cards {
			return nil, fmt.Errorf("annotation %s=%q: entry %q is not a card index; want indices in [0, %d]",
				AnnotationGPUIndex, value, entry, cards-1)
		}
		for _, seen := range out {
			if seen == id {
				return nil, fmt.Errorf("annotation %s=%q: card %d is listed twice; want distinct indices",
					AnnotationGPUIndex, value, id)
			}
		}
		out = append(out, id)
		if !more {
			return out, nil
		}
		rest = tail
	}
}

// EncodeIndex renders card indices as volcano.sh/gpu-index: "0,2".
func EncodeIndex(ids []int) string {
	buf := make([]byte, 0, 4*len(ids))
	for i, id := range ids {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = strconv.AppendInt(buf, int64(id), 10)
	}
	return string(buf)
}

// IndexIs reports whether value is EncodeIndex(ids) (same indices, same
// order, at least one), without allocating.
func IndexIs(value string, ids []int) bool {
	rest := value
	for i, id := range ids {
		entry, tail, more := strings.Cut(rest, ",")
		got, ok := parseCardIndex(entry)
		if !ok || got != id || more != (i < len(ids)-1) {
			return false
		}
		rest = tail
	}
	return len(ids) > 0
}

// DecodeUnhealthy reads volcano.sh/gpu-unhealthy-ids into a flag per card;
// nil when no card is listed. Spaces around entries, empty entries and
// repeated indices are tolerated; an entry that is not a card index of this
// node is an error, because a list that cannot be read (or that names cards
// the node does not have) cannot be trusted to tell which cards are healthy.
func DecodeUnhealthy(value string, cards int) ([]bool, error) {
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

// parseCardIndex parses a card index by the rule of wireint (digits only
// here: an index has no sign), so that one card has one spelling and an
// accounted value reads back as written.
func parseCardIndex(s string) (int, bool) {
	v, ok := wireint.Parse(s, 0, math.MaxInt32)
	return int(v), ok
}
