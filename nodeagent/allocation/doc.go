// Package allocation is what the node agents' Allocate share, whatever the
// devices: the kubelet's request names no pod, so an agent finds the pod it
// is for among the node's pods waiting for an allocation, checks what the
// scheduler wrote on it, answers, and moves the pod's allocation protocol
// forward. Both protocols it serves (Volcano's vGPU and HAMi's Ascend) work
// the same way with other annotation names (Protocol): a devices-to-allocate
// annotation with one entry per container, consumed as containers are
// served; a bind-phase going from allocating to success or failed; the node
// the allocation was written for; a bind-time; a node lock released when the
// pod is done or refused.
//
// The package holds:
//
//   - Patcher, the writes an agent makes (nodeagent/kube.Patcher);
//   - Tracker, which writes a container's outcome (served, failed) and
//     remembers what it wrote until the agent's informer shows it;
//   - Serve and Wait, the shape of an Allocate call: each container request
//     in turn, looking again for a while when the informer lags the kubelet;
//   - the match of a container request to the pod it is for, named by side:
//     Request is the kubelet's (how many devices, when, which pods may
//     serve it); Claim the scheduler's (what it wrote on a pending pod, read
//     for that request, queued oldest first), checked the same way for every
//     protocol by ClaimCheck (the node it was written for, Trust, BindTime),
//     its entries mapped to containers in HAMi's layouts by EntryContainers
//     and its containers' resources read by Limit; Choice the agent's (the
//     first claim in queue order, the refused pods marked failed, and with
//     Misses an error naming why each pending pod did not match). Each agent
//     keeps its own reading of a pod (match.go): the bind-phase and binding
//     checks its protocol makes, its annotations decoded by its protocol
//     package, its own layouts and checks; it offers the claims to a Choice
//     in its own loop, so no callback runs between the kit and the agent;
//   - Refusal and Status, the classes of refusal and their gRPC codes, with
//     the refusals both protocols share (ErrForged, ErrStale), those a
//     Choice tells apart (ErrNotBound, ErrNotAllocating), ErrNotForRequest
//     (a pod passed over, no refusal) and BindTime;
//   - Arrivals, which says which pods a request may be served: those
//     pending when it came, from the informer, else the Journal, which
//     follows the informer's events to say which pods were pending before
//     the informer showed them, else a list from the API server;
//   - Trust, the check of who placed the pod and of its allocation
//     signature (internal/allocsig), with LoadKeys.
package allocation
