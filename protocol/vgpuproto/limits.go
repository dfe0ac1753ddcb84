package vgpuproto

// Limits on decoded values: far above real nodes and pods, and low enough
// that sums over a node stay in range. Decoders refuse values outside them
// with an error naming the field, the value and the allowed range.
const (
	// MaxCards is the most cards a node may register.
	MaxCards = 256
	// MaxCardsPerContainer is the most cards one container entry of an
	// allocation may list.
	MaxCardsPerContainer = MaxCards
	// MaxShareCount is the most pods one card may be shared by.
	MaxShareCount = 1000
	// MaxMemoryMiB is the largest card or allocation memory accepted (1 PiB
	// in MiB; an agent writing gpuMemoryFactor units writes smaller numbers).
	MaxMemoryMiB = int64(1) << 30
	// MaxCores is the largest devcore a card may register and the most cores
	// an allocation entry may record: 100 cards' worth of SMs in percent.
	MaxCores = 100 * DefaultCores
	// DefaultCores is a card's devcore when its registration has none (or
	// 0): one whole card, in percent.
	DefaultCores = 100
	// MaxNUMA is the largest NUMA node a card may register; -1 means none.
	MaxNUMA = 1024
	// MaxMIGPositions is the most instances one MIG geometry may have:
	// positions are 0 to MaxMIGPositions-1.
	MaxMIGPositions = 64
	// MaxLinkScore is the largest pairwise link score accepted.
	MaxLinkScore = 1 << 20
)
