package device

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

// ResultKeyer is implemented by backends whose FilterNode and ScoreNode
// results for a pod depend only on a key of the pod's request, the node's
// Devices, the node's idle CPU and memory where the Devices take them
// (Fitter), and an epoch the backend moves
// whenever anything else they read changes. The plugin then keeps, per
// session, one result per key and node in a dense table, and answers
// every further pod of the same key from it until the node changes: most
// of a session's pods share a few keys, and the table saves the walk
// through each node's Devices that a per-node cache still costs.
type ResultKeyer interface {
	// ResultKey returns the pod's request key under the policy: two pods
	// with one key get the same FilterNode and ScoreNode results on the
	// same node. ok is false when the results must not be shared.
	ResultKey(pod *v1.Pod, policy string) (key string, ok bool)
	// ResultEpoch changes (grows) whenever results for an unchanged key
	// and node may change: for example a new learned workload.
	ResultEpoch() uint64
}

// Host is what a node has free outside its cards: Volcano's NodeInfo.Idle
// CPU in milli-cores and memory in MiB. The zero value (Known false) means
// unknown, taken as plentiful.
type Host struct {
	CPUMilli, MemMiB int64
	Known            bool
}

// Prepared is a backend's reading of one pod's request under a policy
// (Preparer): what FilterNode, ScoreNode and Allocate would otherwise read
// from the pod on every node, read once per task. It is read-only once
// returned, so concurrent Fit calls may share it.
type Prepared any

// Preparer is implemented by backends whose Devices are Fitters. The plugin
// prepares each pending task's request once, when the session opens, and
// hands it to every node's Devices.
//
// A Preparer that is also a ResultKeyer promises more: two pods with one
// ResultKey under a policy prepare without error to Prepared values that
// Fit and AllocatePrepared read alike (whatever either reads of the pod
// itself, it reads from its pod argument). The plugin then prepares one
// request per key and session, and hands it to every task of that key.
type Preparer interface {
	// Prepare reads the pod's request under the policy. Its error is the
	// one ValidateRequest returns; a pod without a request of this type
	// gives an empty Prepared and no error.
	Prepare(pod *v1.Pod, policy string) (Prepared, error)
}

// Fitter is implemented by Devices that check and score a prepared request
// (Preparer) in one choice of cards, with what the node has free outside
// them as an argument (the vGPU fragment policy weighs it: a card no pod can
// use beside the node's CPU and memory is stranded). The plugin calls these
// instead of FilterNode, ScoreNode and Allocate, and keeps the results
// itself (device.ResultKeyer): nothing is stored on the Devices, which
// Volcano's concurrent predicates read at once.
type Fitter interface {
	// Fit returns FilterNode's status and, when the request fits (nil
	// status), ScoreNode's score, for the pod prepared as req.
	Fit(pod *v1.Pod, req Prepared, host Host) (score float64, st *Status)
	// AllocatePrepared is Allocate of the cards Fit chose.
	AllocatePrepared(pod *v1.Pod, req Prepared, host Host) (*Reservation, error)
}
