package api

// InventoryWarner is implemented by Devices whose node registration was
// read with a part of it left out: the devices work, but without what that
// part would have given (for example a vGPU node's link scores that do not
// parse, which turns topology-aware placement off for the node). The
// plugin records each warning as a Warning event on the node once per
// registration value, so operators see it next to the node.
type InventoryWarner interface {
	// InventoryWarnings returns the parts left out, each naming the
	// annotation, the value's problem and what is allowed.
	InventoryWarnings() []error
}
