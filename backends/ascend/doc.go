// Package ascend implements HAMi's Ascend vNPU sharing as a deviceshare
// backend (device.Backend, device.Devices, device.Advertiser, device.NodeLocker,
// device.CardReporter), one Backend per entry of the device ConfigMap's vnpus
// section, wire-compatible with HAMi's scheduler and Ascend device plugin
// (HAMi pkg/device/ascend) and Volcano's hami Ascend device
// (pkg/scheduler/api/devices/ascend/hami).
//
// # Requests
//
// Per container, with the entry's resource names (defaults shown for
// commonWord Ascend910B3):
//
//   - huawei.com/Ascend910B3: cards (required whenever memory or cores are
//     asked).
//   - huawei.com/Ascend910B3-memory: memory per card, times memoryFactor
//     MiB; absent means the whole card.
//   - huawei.com/Ascend910B3-core (resourceCoreName): percent of the card's
//     AI cores, 0 to 100; naming it asks for hami-core slicing, as HAMi reads it.
//
// ValidateRequest refuses what no node can serve: negative or fractional
// values, memory above the chip's memoryCapacity, cores above 100, memory or
// cores without a count, several cards with less than whole-card memory
// (HAMi's webhook refuses that too), NPUs in init containers and an unknown
// huawei.com/vnpu-mode.
//
// # Modes
//
// A node slices softly (hami-core) when its hami-vnpu-core annotation is
// "true", by templates when it is "false", and as vnpus.hamiVnpuCore (or
// hamiVnpuMode) says when it has none. A pod asks for hami-core with
// huawei.com/vnpu-mode: hami-core or a core request; such a pod does not fit
// a template node. Other pods follow the node.
//
// Template mode rounds memory up to the smallest fitting template of the
// entry (vnpu.Chip.RoundUp) or to the whole card, and charges the card the
// template's memory and AI cores; the vnpu slicing rules (AI cores, AI CPUs,
// DVPP) decide which templates share a card. hami-core mode charges the
// requested memory and core percent, with HAMi's rules: cores=100 needs an
// unused card, a card whose cores are all taken refuses cores=0.
//
// # Annotations
//
// The keys, formats, limits and their sources are protocol/ascendproto's. The
// backend reads the node's hami.io/node-register-<commonWord> (cards in
// order; a malformed registration is an error naming the annotation and the
// card), its hami.io/node-handshake-<commonWord> ("Deleted_..." means the
// agent is gone) and hami-vnpu-core, and the pod's huawei.com/vnpu-mode and
// hami.io/use-<commonWord>-uuid / no-use-<commonWord>-uuid selectors.
//
// Allocate writes, on the v1.Binding,
// hami.io/<commonWord>-devices-to-allocate and -devices-allocated (the
// device plugin consumes the first; accounting reads the second, which
// stays; template mode records the template's memory and cores 0),
// huawei.com/<commonWord> (the template per card in template mode, the
// memory and cores in hami-core mode), hami.io/vgpu-node, hami.io/vgpu-time,
// hami.io/bind-time, predicate-time and hami.io/bind-phase: allocating.
// Accounting checks every recorded card against the node: a card of this
// chip type, within its memory.
//
// The node lock (deviceshare.NodeLockEnable) is hami.io/mutex.lock.
//
// # Placement
//
// Per container and card: health, type (the registered type must be empty,
// the commonWord or contain the chip name), UUID selectors, mode, size, vNPU
// count, exclusivity and cores (hami-core) or slicing (template), memory.
// Each rejected card adds a stable reason. Among fitting cards binpack takes
// the fullest after placement, spread the emptiest, fullness being the mean
// of the memory and cores fractions; ties go to the lowest index. On
// Ascend910 chip types whose cards all carry a NetworkID, a multi-card
// container takes its cards from one network group when one can hold them
// (binpack: the smallest such group, spread: the largest), and
// networkWeight points of the node score reward keeping them together.
//
// # Differences from upstream
//
// Template mode tracks AI cores, AI CPUs and DVPP per card, not only memory;
// health and the registered type are honoured; card reasons are reported;
// allocation travels on the binding instead of a synchronous patch; the
// choice is deterministic (upstream walks a map); the memory and core
// resources are advertised on the node (device.Advertiser) so Volcano's
// resource fit passes without the webhook's help.
package ascend
