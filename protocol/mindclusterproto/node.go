package mindclusterproto

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/vgpushare/vshare/protocol/internal/wireint"
)

// ServerTypeCores reads the AI cores per chip from a 310P node's servertype
// label, "Ascend310P-<AI cores per chip>[-suffix]".
func ServerTypeCores(serverType string) (int32, error) {
	f := strings.Split(serverType, "-")
	var per int64
	ok := len(f) >= 2 && f[0] == ServerTypeKind
	if ok {
		per, ok = wireint.Parse(f[1], 1, math.MaxInt32)
	}
	if !ok {
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
		digits, prefixed := strings.CutPrefix(e, ChipPrefix)
		id, ok := wireint.Parse(digits, 0, math.MaxInt)
		if !prefixed || !ok {
			return nil, fmt.Errorf("chip %q: want %s<id>, like %s0", e, ChipPrefix, ChipPrefix)
		}
		if slices.Contains(ids, int(id)) {
			return nil, fmt.Errorf("chip %q listed twice", e)
		}
		ids = append(ids, int(id))
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
