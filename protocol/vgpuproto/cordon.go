package vgpuproto

// Node annotations an operator writes to take single cards out of
// scheduling without draining the node (a per-card `kubectl cordon`). The
// value is a comma-separated list of card UUIDs as the registration names
// them; spaces around entries and empty entries are ignored. New pods do not
// get a cordoned card; pods already holding it keep it.
const (
	// AnnotationCordon is this project's key.
	AnnotationCordon = "volcano.sh/vgpu-cordon"
	// AnnotationHAMiCordon is HAMi's key for the same thing
	// (Project-HAMi/HAMi pull request #2298, pkg/device/nvidia/device.go
	// DeviceCordonAnnotation), read too so that one annotation serves both
	// schedulers.
	AnnotationHAMiCordon = "hami.io/device-cordon"
)
