package cardfit

import (
	"fmt"
	"strings"
)

// maxListedCards bounds how many of the node's cards a cordon error lists.
const maxListedCards = 8

// Cordon reads the node's card-cordon annotations (the keys, in order; see
// protocol/vgpuproto AnnotationCordon) against the node's card IDs and reports,
// by card index, which cards are cordoned. Every entry of every key that
// names a card of the node cordons it; an entry that is malformed (it holds
// spaces, ';', ':' or '=' — the list separator is ',') or names no card of
// the node cordons nothing and is reported in problems, one error per key
// naming the annotation, its value and what is allowed. The cards the
// other entries name stay cordoned, so one typo does not uncordon a list.
//
// HAMi's reading of hami.io/device-cordon (Project-HAMi/HAMi pull request
// #2298, pkg/device/nvidia/device.go cordonedDevices) splits on ',' and
// trims spaces the same way, and ignores entries that match no card; this
// one reports them instead.
func Cordon(annotations map[string]string, ids []string, keys ...string) (cordoned []bool, problems []error) {
	for _, key := range keys {
		value, ok := annotations[key]
		if !ok || strings.TrimSpace(value) == "" {
			continue
		}
		var malformed, unknown []string
		for _, entry := range strings.Split(value, ",") {
			entry = strings.TrimSpace(entry)
			if entry == "" {
				continue
			}
			if strings.ContainsAny(entry, " \t\n;:=") {
				malformed = append(malformed, entry)
				continue
			}
			i := indexOf(ids, entry)
			if i < 0 {
				unknown = append(unknown, entry)
				continue
			}
			if cordoned == nil {
				cordoned = make([]bool, len(ids))
			}
			cordoned[i] = true
		}
		if err := cordonProblem(key, value, malformed, unknown, ids); err != nil {
			problems = append(problems, err)
		}
	}
	return cordoned, problems
}

func cordonProblem(key, value string, malformed, unknown, ids []string) error {
	if len(malformed) == 0 && len(unknown) == 0 {
		return nil
	}
	var parts []string
	if len(malformed) > 0 {
		parts = append(parts, fmt.Sprintf("%s malformed (want card UUIDs separated by commas)", quoteAll(malformed)))
	}
	if len(unknown) > 0 {
		listed := ids
		more := ""
		if len(listed) > maxListedCards {
			listed, more = listed[:maxListedCards], fmt.Sprintf(" and %d more", len(ids)-maxListedCards)
		}
		parts = append(parts, fmt.Sprintf("%s names no card of the node (its cards: %s%s)",
			quoteAll(unknown), strings.Join(listed, ", "), more))
	}
	return fmt.Errorf("node annotation %s=%q: %s; those entries cordon nothing, the others are cordoned",
		key, value, strings.Join(parts, "; "))
}

func indexOf(ids []string, id string) int {
	for i, v := range ids {
		if v == id {
			return i
		}
	}
	return -1
}

func quoteAll(s []string) string {
	q := make([]string, len(s))
	for i, v := range s {
		q[i] = fmt.Sprintf("%q", v)
	}
	return strings.Join(q, ", ")
}
