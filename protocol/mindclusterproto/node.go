package mindclusterproto

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ServerTypeCores reads the AI cores per chip from a 310P node's servertype
// label, "Ascend310P-<AI cores per chip>[-suffix]".
func ServerTypeCores(serverType string) (int32, error) {
	f := strings.Split(serverType, "-")
	var per int64
	var err error
	if len(f) >= 2 && f[0] == ServerTypeKind {
		per, err = strconv.ParseInt(f[1], 10, 32)
	}
	if len(f) < 2 || f[0] != ServerTypeKind || err != nil || per <= 0 {
		return 0, fmt.Errorf("label %s=%q: want %s-<AI cores per chip>[-suffix], like %s-8", LabelServerType, serverType,
			ServerTypeKind, ServerTypeKind)
	}
	return int32(per), nil
}

// DecodeChips reads a chip list like "Ascend310P-0,Ascend310P-3" into
// sorted IDs. Empty entries are skipped, as upstream does; other entries
// must be Ascend310P-<id> with a distinct non-negative decimal id written
// without sign or leading zeros.
func DecodeChips(s string) ([]int, error) {
	var ids []int
	for _, e := range strings.Split(s, ",") {
		if e == "" {
			continue
		}
		digits, ok := strings.CutPrefix(e, ChipPrefix)
		id, err := strconv.Atoi(digits)
		if !ok || err != nil || id < 0 || strconv.Itoa(id) != digits {
			return nil, fmt.Errorf("chip %q: want %s<id>, like %s0", e, ChipPrefix, ChipPrefix)
		}
		if slices.Contains(ids, id) {
			return nil, fmt.Errorf("chip %q listed twice", e)
		}
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids, nil
}

// EncodeChips renders chip IDs as DecodeChips reads them.
func EncodeChips(ids ...int) string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = ChipPrefix + strconv.Itoa(id)
	}
	return strings.Join(names, ",")
}
