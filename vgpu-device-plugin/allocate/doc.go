// Package allocate serves the kubelet's Allocate calls for vGPUs: it finds the
// pod the kubelet is admitting, checks the allocation the scheduler recorded
// on it, builds the container's environment and mounts for libvgpu, and moves
// the pod's allocation protocol forward.
//
// # Protocol (volcano-vgpu-device-plugin, Volcano v1.10 vGPU, HAMi)
//
// The keys and formats are protocol/vgpuproto's. The scheduler writes on the pod,
// with the binding, volcano.sh/vgpu-ids-new and volcano.sh/devices-to-allocate
// (the cards per container: one entry per container from our scheduler,
// the init containers' first when one of them has cards, entries only for
// the containers that ask for vGPUs from Volcano v1.10; all are read), volcano.sh/vgpu-node, volcano.sh/vgpu-time (the order pods
// are served in), volcano.sh/bind-time and volcano.sh/bind-phase:
// allocating; and the node lock annotation (default key "hamivgpu") on the
// node.
//
// The kubelet's AllocateRequest does not say which pod it is for. As upstream
// does, the agent serves the pod on this node in bind-phase allocating with
// the oldest vgpu-time whose next pending devices-to-allocate entry has as
// many cards as the kubelet asks for. It consumes that entry (rewriting
// devices-to-allocate with the entry emptied); when no entry is left it sets
// bind-phase success and releases the node lock (reading the node), unless
// the verified allocation signature covers vshare.io/node-locks and that
// does not name the agent's lock: our scheduler then took none. A refused
// allocation sets bind-phase failed and releases the lock.
//
// The entry served is the container the kubelet is admitting: the
// kubelet admits init containers (native sidecars included), then regular
// containers, in spec order, with one Allocate per container asking for
// the count resource, for that many devices, whether it reuses an earlier
// init container's devices or not (k8s.io/kubernetes v1.30
// pkg/kubelet/cm/devicemanager manager.go). The device IDs are not read.
// A pod whose entries would not follow those calls one for one (a
// container asking for cards without an entry of that many, an entry for
// a container asking for none, an init container asking when the
// allocation has no init entries) is refused as forged rather than served
// another container's cards (match.go, containerFor). The pod's region,
// cache directory (containers/<pod UID>_<container>) and limits are the
// served container's, init container or not.
//
// Only a pod pending when the request came is served (a pod bound later
// has its own request coming): the informer's pending pods, or, when it
// shows none yet, the pods a nodeagent/allocation.Journal sees entering
// allocating phase after the request, up to its cut; the API server is
// listed (LivePods) only when the journal cannot vouch (docs/architecture.md,
// "Which pod a request is for").
//
// Pods come from a node-scoped informer's indexer (PodLookup), never from a
// List call per Allocate; writes go through a Patcher. Writes the informer
// has not reflected yet are remembered, so a pod's next container never sees
// the entry the previous one consumed.
//
// # GetPreferredAllocation
//
// Before Allocate the kubelet asks which device IDs to give the container
// (PreferredCards, turned into IDs by nodeagent/deviceplugin): the cards of
// the entry Allocate will serve next, found the same way but only looked
// at (no pod is marked failed), so the kubelet's record of the container's
// devices names the scheduler's cards. Allocate does not depend on it.
//
// # MPS cards
//
// On cards registered in the mps operating mode the node's CUDA MPS control
// daemon enforces the shares: the answer carries the MPS client environment
// (pipe and log directories, active thread percentage from the cores,
// pinned device memory per visible device from the memory, client priority)
// and mounts the daemon's directories under Options.MPSHostRoot, without
// libvgpu (mps.go).
//
// # Whole cards
//
// A container with every card of its entry to itself (nvidia.Inventory.Whole:
// all the card's physical memory, no SM limit, no over-commit) gets its cards and
// nothing of libvgpu: there is nothing to enforce, and NCCL and vLLM then
// run without an interposer (libvgpu/README.md, "Whole cards").
//
// # What is refused
//
// Users can write annotations on their own pods, so nothing in them is
// trusted. Allocate refuses, with a gRPC error naming the pod and the field:
// annotations written for another node; an entry that differs from
// vgpu-ids-new; cards this node does not register (or hides by
// filterdevices), unknown device types and malformed entries; an entry mixing MPS cards
// with others or MIG instances with shared cards; an entry asking
// for more memory or cores than one card has or than the container requests;
// allocations that, with every other vGPU pod on the node, would exceed a
// card's memory, cores or share count (each pod counted at its peak,
// vgpu.Peak, as the scheduler charges it), or reuse a MIG instance; unhealthy
// cards; and stale allocations whose bind-time is older than StaleAfter.
package allocate
