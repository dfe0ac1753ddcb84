// Package api defines the contract between the deviceshare scheduler plugin
// and its device backends.
//
// A Backend describes one device type (GPU share, GPU number, HAMi vGPU,
// Ascend vNPU...). It decodes a node's inventory into a Devices value, which
// holds the per-node card state: capacity from the node's registration and
// usage from the pods accounted on it. The plugin keeps one Devices per node
// and backend in its long-lived ledger, gives each scheduling session a deep
// copy, and drives Filter, Score, Allocate and Release on that copy.
//
// Allocation never talks to the API server. Allocate returns a Reservation: the
// annotations that record the choice. The plugin's binder puts them on the
// pod's v1.Binding, and the API server copies binding annotations onto the
// pod, so the allocation travels with the bind. Accounting reads the same
// annotations back (AddResource/SubResource), which makes Allocate and Release
// exact inverses by construction: Release(pod, r) must leave the Devices
// exactly as they were before the Allocate that returned r.
package device
