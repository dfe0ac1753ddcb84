// Package deviceshare is the Volcano scheduler plugin "deviceshare": it lets
// many pods share a GPU or NPU and hands out whole cards, over device
// backends that implement device.
//
// # Life cycle
//
// Volcano builds plugins every session (about every second). Long-lived
// state lives in one State per process, created by Register; the plugin
// value Volcano builds each session only carries that session's arguments
// and view.
//
// At session open the node state (nodestate.Store) is brought up to date
// with the session's snapshot: node inventories are decoded again only when
// their registration changes, pods are accounted again only when their
// allocation annotations change, and allocations this scheduler made whose
// binds are in flight (assumed bind.Decisions) are accounted although the
// informer does not show their annotations yet. The session then reads the
// node state's devices and copies a node's devices on its first allocation
// there.
//
// Within a session, the predicate outcome and the node score of a pod
// whose backends key their results (device.ResultKeyer) are kept per request
// key and node in dense result tables (deviceshare/fitcache, the
// predicate's one cache, which lives one session), valid while the node's
// stamp (moved by every allocation event on the node and every write to
// its devices) and the backends' epochs hold: most pods of a session share
// a few keys and answer from one table entry per node. The backends keep
// no results of their own; a backend that reads a pod once per task
// (device.Preparer) has its reading kept with the task's request and
// handed back with every node (device.Fitter), which returns the outcome
// and the score from one choice of cards.
//
// # Extension points
//
//   - PredicateFn: per-card fit with stable, countable reasons; a node
//     locked by an in-flight allocation is skipped (NodeLockEnable).
//   - NodeOrderFn: the weighted device score under SchedulePolicy.
//   - BatchNodeOrderFn: backends scoring across nodes (device.BatchScorer).
//   - Event handlers: allocation picks the cards and records the decision
//     once (bind.Decisions; the session's pod is left alone); deallocation (discarded gang, eviction) gives back exactly
//     what was taken.
//   - PreemptableFn, ReclaimableFn, AllocatableFn, PrePredicateFn: device-
//     aware preemption and reclaim (preempt.go): only victims holding cards
//     the preemptor needs, the fewest of the lowest priority, evicted until
//     the cards fit (the search: deviceshare/evictplan).
//   - JobEnqueueableFn and AllocatableFn: queue capability on device
//     resources, counted from allocation annotations (queue.go,
//     deviceshare/queuecap).
//   - Namespace quotas on shares (quota.go, deviceshare/quotawatch): a
//     ResourceQuota's limits.<vGPU resource> caps what a namespace's pods
//     hold (memory and cores times cards), counted from the node state's pods
//     at session open and every allocation of the session; the predicate
//     refuses nodes that would pass it (per node when a memory percentage
//     resolves on the card), the allocation handler refuses the bind of
//     anything that still would, and the usage is exported as metrics.
//     The ResourceQuotas come from an informer started with the first
//     session's client; until it has listed them, vGPU pods wait.
//
// The bind side lives in deviceshare/bind: the State hands its Binder the
// clock, the node state's inventory generations (nodestate.Store.InventoryGen) and the
// bind counters, and every allocation the sessions make is recorded once,
// as a bind.Decision, which the binder claims at bind and the node state
// accounts until the informer shows the pod (see that package).
package deviceshare
