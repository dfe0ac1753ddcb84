package device

// CardReporter is implemented by Devices that report per-card usage, which
// the plugin exports as Prometheus metrics at scrape time. It only reads.
type CardReporter interface {
	// CardUsage returns every card's usage, by card index, and the number of
	// pods holding cards of this type on the node.
	CardUsage() (cards []CardUsage, pods int)
}

// CardUsage is one card's capacity and what accounted pods hold of it.
type CardUsage struct {
	// ID identifies the card on its node (a UUID, or an index).
	ID string
	// Index is the card's position in the node's registration.
	Index int
	// Type is the card model as registered.
	Type string
	// Healthy is false for cards that are never chosen.
	Healthy bool
	// MemoryUsedMiB and MemoryTotalMiB are the allocated and total memory.
	MemoryUsedMiB, MemoryTotalMiB int64
	// CoresUsed and CoresTotal are the allocated and total SM percentages.
	CoresUsed, CoresTotal int64
	// Pods is the number of allocations sharing the card; MaxPods the most
	// it may have.
	Pods, MaxPods int
	// Cordoned cards are skipped for new pods (an operator's node
	// annotation); pods holding them keep them.
	Cordoned bool
}
