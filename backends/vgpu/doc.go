// Package vgpu implements HAMi vGPU sharing (hami-core and MIG modes) as a
// deviceshare backend (device.Backend, device.Devices, device.Advertiser,
// device.NodeLocker, device.CardReporter), wire-compatible with Volcano's vGPU
// device (v1.10.0 and later) and volcano-vgpu-device-plugin, and able to read
// nodes registered by HAMi's own node agent.
//
// # Requests and pod annotations
//
// Per container, volcano.sh/vgpu-number, -memory, -memory-percentage and
// -cores (the resource names of the device ConfigMap's nvidia: section),
// init containers and native sidecars included; per pod, the mode, the
// card type and UUID selectors, PodGroup spread, the card and node
// policies and NUMA binding. Package request parses them, documents each,
// and refuses (ValidateRequest) what no node can serve.
//
// # Node annotations read
//
// The registration formats, their limits and their sources are
// protocol/vgpuproto's. The backend reads volcano.sh/node-vgpu-register, or
// HAMi's hami.io/node-nvidia-register when the node has none, indexing the
// cards in order; hami.io/node-nvidia-score gives topology-aware its link
// scores (without it topology-aware falls back to the node policy). A
// volcano.sh/node-vgpu-handshake of "Deleted_..." means the agent is gone
// and the node has no usable vGPUs; no handshake is written.
//
// A malformed registration is an error naming the annotation, the card and
// the field: the node's vGPUs stay unavailable (the plugin logs it and
// records a Warning event on the node). Unhealthy cards are never
// chosen. A card in mig mode whose model matches no entry of
// nvidia.knownMigGeometries is shared as hami-core, logged.
//
// # Allocation (pod annotations written, on the v1.Binding)
//
// volcano.sh/vgpu-ids-new and volcano.sh/devices-to-allocate (one entry per
// regular container, empty for containers without vGPUs, so the agent's
// container index is the pod's; when an init container has cards, one
// entry per init container first, the order the kubelet admits them in,
// vgpuproto.InitEntries; a MIG instance's position counts the
// geometry's instances in catalogue order, memory is the request and the
// card is charged the instance's size), volcano.sh/vgpu-node,
// volcano.sh/vgpu-time, volcano.sh/bind-time and volcano.sh/bind-phase:
// allocating; protocol/vgpuproto encodes them.
//
// Accounting reads volcano.sh/vgpu-ids-new back (the agent consumes
// devices-to-allocate), checking every card against the node: registered,
// within its cores, a MIG instance of its geometries. Each card is charged
// what the pod holds of it at its peak (vgpuproto.Peak: memory, cores and
// holders each the most in one phase of the pod), for the pod's life. Memory is MiB in every
// annotation, as DESIGN.md's wire contract says; upstream agents that
// register and record memory in gpuMemoryFactor units agree only when the
// factor is 1.
//
// The node lock (deviceshare.NodeLockEnable) is the node annotation
// "hamivgpu", which volcano-vgpu-device-plugin releases once it served the
// pod.
//
// On a node registered only in HAMi's format the agent is HAMi's NVIDIA
// device plugin, which reads hami.io/* only (hami.go): Allocate writes
// hami.io/vgpu-devices-to-allocate and -allocated (init containers'
// entries first, empty unless they have cards, ";" after every entry), hami.io/vgpu-node, -time,
// bind-time and bind-phase: allocating, keeps volcano.sh/vgpu-ids-new,
// vgpu-node and the times as the record, leaves out
// volcano.sh/devices-to-allocate and bind-phase, and asks the binder for
// HAMi's lock hami.io/mutex.lock (device.Reservation.NodeLocks), always and
// instead of "hamivgpu". AgentPending reads hami.io/bind-phase there. Pods
// HAMi's own scheduler placed (bound, only hami.io/vgpu-devices-allocated)
// are accounted from that annotation, whatever resources they ask for
// (HasDeviceRequest). Cards HAMi registers in mig mode are never chosen.
//
// # Placement
//
// Per container and card, the checks are: health, mode, type selectors,
// UUID selectors, size (memory or cores larger than the card), PodGroup
// spread, share count (count > used), exclusivity (cores=100 needs an
// unused card; a card whose cores are all allocated refuses cores=0),
// cores, MIG instance, memory. Each rejected card adds a stable reason to
// the failure; a node with fewer cards than a container asks for is
// unresolvable.
//
// Among fitting cards, binpack takes the fullest after placement, spread
// the emptiest, where fullness is the mean of the memory, cores and share
// count fractions; ties go to the lowest index. numa-bind restricts a
// multi-card container to one NUMA node, the best one under the policy.
// topology-aware takes, for several cards, the set with the highest sum of
// pairwise link scores and, for one card, the card with the worst links,
// keeping well-linked sets free. Containers are placed in order, each
// seeing the earlier ones' cards; a pod with init container requests is
// placed phase by phase (phased.go): each container sees what the pod's
// earlier containers hold in the phases it runs in, takes the cards of a
// regular init container before it (which the kubelet gives it again),
// and a regular init container only takes cards the containers after it
// that inherit them fit too. Init container requests are unresolvable on
// nodes registered by volcano-vgpu-device-plugin, which maps allocation
// entries to regular containers only.
//
// FilterNode, ScoreNode and Allocate share one choice function, so the
// score is computed from the cards Allocate takes: binpack scores
// MaxScore times the chosen cards' mean fullness after placement, spread
// MaxScore times one minus their mean fullness before it (idle cards score
// MaxScore).
//
// # Differences from upstream Volcano v1.10
//
// Spread really prefers idle cards and scores them (upstream scores 0);
// percentages are computed per card in 64-bit arithmetic (upstream divides
// as integers and gets 0); health is honoured; requests no node can serve
// are refused with a reason; the handshake is optional and never written;
// allocation annotations travel on the binding instead of a synchronous
// patch; the choice is deterministic (upstream walks a map).
//
// # Exclusive rules and card cordon
//
// Options.ExclusiveRules (the argument deviceshare.GPUExclusiveRules,
// upstream Volcano pull request #5213) keep pods matching a same label rule
// off each other's hami-core cards: the rules a pod matches are part of its
// holding, counted per card, so restarts and in-flight binds count as the
// cards do (exclusive.go). The node annotations volcano.sh/vgpu-cordon and
// hami.io/device-cordon (HAMi pull request #2298) cordon cards by UUID: a
// cordoned card fails the static checks for new pods, right after health,
// while pods holding it stay accounted; entries naming no card are
// InventoryWarnings, not errors, so one typo never takes the node's cards
// away. The cordon is part of InventoryKey, so a change decodes the node
// again.
//
// # Packages
//
// Three packages below this one hold what does not need its state, and
// none imports it: request parses and validates a pod's request
// (request.Parser, request.Pod); inventory decodes a node's registration,
// cordons and link scores (inventory.Decode) and a card model's MIG
// geometries (inventory.Layout); frag is the fragment policy's model (the
// learned workload, the fragmentation measure, the card models' scarcity)
// on plain card figures. This package keeps the node's cards and the pods
// holding them (devices.go), the card check (fit.go), the choice
// (choose.go, phased.go), filtering and scoring (filter.go, frag.go),
// allocation and its records (allocate.go, codec.go, hami.go) and the
// exclusive rules (exclusive.go).
//
// # State
//
// Per-card data that never changes (UUID, type, capacity, MIG layout, link
// sums) is decoded once and shared by every copy; the mutable part is a
// small value per card plus one immutable record per accounted pod, so
// DeepCopy copies two slices' worth. FilterNode and ScoreNode allocate
// nothing on nodes of up to 16 cards and never write.
package vgpu
