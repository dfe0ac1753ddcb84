package device

// InventoryWarner is implemented by Devices whose node registration or
// settings were read with a part of them left out: the devices work, but
// without what that part would have given (a vGPU node's link scores that
// do not parse turn topology-aware placement off for the node; a card
// cordon naming no card of the node cordons nothing). The plugin records
// each warning as a Warning event on the node once per value:
// InvalidDeviceSetting for an IgnoredSetting, DegradedDeviceRegistration
// otherwise, so operators see it next to the node.
type InventoryWarner interface {
	// InventoryWarnings returns the parts left out, each naming the
	// annotation, the value's problem and what is allowed.
	InventoryWarnings() []error
}

// IgnoredSetting marks an inventory warning about an operator's node
// setting (such as a card cordon entry naming no card), as against a part
// of the agent's registration.
type IgnoredSetting struct{ Err error }

func (e IgnoredSetting) Error() string { return e.Err.Error() }

// Unwrap returns the setting's error.
func (e IgnoredSetting) Unwrap() error { return e.Err }
