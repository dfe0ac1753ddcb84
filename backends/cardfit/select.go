package cardfit

import "strings"

// Excluded reports whether a pod's comma-separated card ID selectors
// exclude the card id: use names only the cards the pod may take, noUse
// the cards it must not. Entries match id exactly, spaces around them
// ignored; an empty list selects nothing out. It does not allocate.
func Excluded(use, noUse, id string) bool {
	// Most pods name no selector: that test inlines into the callers'
	// per-card loops.
	return (use != "" || noUse != "") && excluded(use, noUse, id)
}

func excluded(use, noUse, id string) bool {
	return use != "" && !listHas(use, id) || noUse != "" && listHas(noUse, id)
}

// TypeExcluded reports whether a pod's comma-separated, upper-cased card
// type selectors exclude a card of the upper-cased type typeUpper: an
// entry matches when the type contains it, as upstream HAMi and Volcano
// match types (use: "A100" takes "NVIDIA-A100-SXM4-80GB").
func TypeExcluded(use, noUse, typeUpper string) bool {
	return (use != "" || noUse != "") && typeExcluded(use, noUse, typeUpper)
}

func typeExcluded(use, noUse, typeUpper string) bool {
	return use != "" && !listMatchesType(use, typeUpper) || noUse != "" && listMatchesType(noUse, typeUpper)
}

// listHas reports whether the comma-separated list holds item exactly
// (spaces around entries ignored), without allocating.
func listHas(list, item string) bool {
	for list != "" {
		var e string
		e, list, _ = strings.Cut(list, ",")
		if strings.TrimSpace(e) == item {
			return true
		}
	}
	return false
}

// listMatchesType reports whether the upper-cased type contains one of the
// comma-separated upper-cased entries.
func listMatchesType(list, typeUpper string) bool {
	for list != "" {
		var e string
		e, list, _ = strings.Cut(list, ",")
		if e = strings.TrimSpace(e); e != "" && strings.Contains(typeUpper, e) {
			return true
		}
	}
	return false
}
