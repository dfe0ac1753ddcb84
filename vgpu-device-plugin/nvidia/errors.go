package nvidia

import "errors"

// Sentinel errors; test with errors.Is.
var (
	// ErrUnknownDevice is returned for a UUID that is not one of the node's GPUs.
	ErrUnknownDevice = errors.New("unknown GPU")
	// ErrNoGeometry is returned when a MIG allocation names a geometry group
	// or position that the card's model does not have in the catalogue.
	ErrNoGeometry = errors.New("no such MIG geometry")
	// ErrMIGBusy is returned when a card must change geometry while instances
	// of its current geometry are in use.
	ErrMIGBusy = errors.New("MIG geometry in use")
	// ErrMIGDisabled is returned for a MIG allocation on a card whose MIG
	// mode is off.
	ErrMIGDisabled = errors.New("MIG mode is disabled on the GPU")
)
