package gpushare

import (
	"fmt"
	"strings"
)

// parseIndices decodes a volcano.sh/gpu-index value: exactly want distinct
// card indices in [0, cards), comma-separated, digits only. Errors name the
// annotation, the value and what is allowed.
func parseIndices(value string, want int64, cards int) ([]int, error) {
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
