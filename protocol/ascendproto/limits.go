package ascendproto

import "math"

// Limits on decoded values: far above real nodes and pods. Decoders and
// EncodeRegister refuse values outside them with an error naming the field,
// the value and the allowed range.
const (
	// MaxCards is the most cards a node may register.
	MaxCards = 256
	// MaxCount is the most vNPUs one card may be shared by.
	MaxCount = 1000
	// MaxMemoryMiB is the largest card or allocation memory accepted (1 PiB).
	MaxMemoryMiB = int64(1) << 30
	// MaxDevcore is the largest devcore a card may register (AI cores in
	// template mode, 100 in hami-core mode).
	MaxDevcore = math.MaxInt16
	// MaxNUMA is the largest NUMA node a card may register; -1 means none.
	MaxNUMA = 1024
	// MaxIndex is the largest index a card may register.
	MaxIndex = math.MaxInt32
	// maxNetworkID bounds custominfo.NetworkID in absolute value.
	maxNetworkID = 1 << 31
	// FullCores is a whole card's AI cores in an allocation, in percent.
	FullCores = 100
)
