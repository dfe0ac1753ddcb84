package api

import (
	v1 "k8s.io/api/core/v1"
)

// Backend is one device type: it recognises the pods that ask for it and
// decodes nodes' inventories. A Backend is long-lived and safe for concurrent
// use; per-node state lives in the Devices it creates.
type Backend interface {
	// Name is the device type's stable name, used in logs, metrics and
	// failure reasons (for example "gpushare" or "hamivgpu").
	Name() string
	// HasDeviceRequest reports whether the pod asks for this device type.
	HasDeviceRequest(pod *v1.Pod) bool
	// ValidateRequest rejects requests that no node could ever satisfy
	// (negative or non-numeric values, a share above 100%...), with an error
	// naming the container, the resource, the value and what is allowed.
	ValidateRequest(pod *v1.Pod) error
	// InventoryKey returns the parts of the node NewDevices reads, so the
	// ledger decodes a node again only when they change.
	InventoryKey(node *v1.Node) string
	// NewDevices decodes the node's inventory. It returns (nil, nil) when the
	// node has no devices of this type, and an error naming the annotation and
	// the problem when the inventory is malformed.
	NewDevices(node *v1.Node) (Devices, error)
}

// BatchScorer is implemented by backends whose node score depends on the
// other candidate nodes (for example topology-aware Ascend placement). The
// plugin calls it from its BatchNodeOrderFn.
type BatchScorer interface {
	// BatchScore scores every candidate node, by node name, in [0, MaxScore].
	BatchScore(pod *v1.Pod, policy string, nodes map[string]Devices) map[string]float64
}

// NodeLocker is implemented by backends whose node agents expect a node
// lock while an allocation is in flight (deviceshare.NodeLockEnable). The
// lock is the node annotation LockName(); its value is the lock time.
type NodeLocker interface {
	// LockName is the node annotation key of the lock (upstream Volcano uses
	// "gpu" for GPU share and the device name for vGPU); "" means the device
	// type takes no lock.
	LockName() string
}
