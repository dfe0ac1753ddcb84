// Package vgpuproto is the wire protocol between a vGPU scheduler and its NVIDIA
// node agent: the keys, the encoders and the decoders, with one set of
// limits and one set of error texts. The scheduler backend (backends/vgpu),
// the node agent (vgpu-device-plugin), the e2e harness and the tests all
// speak it through this package. It depends on nothing but the standard
// library and the Kubernetes Pod type (which container an entry is for).
//
// Upstream defines the protocol in volcano-sh/volcano
// pkg/scheduler/api/devices/nvidia/vgpu (type.go: the keys;
// utils.go: decodeNodeDevices, encodePodDevices, decodePodDevices) and in
// volcano-vgpu-device-plugin (pkg/util: EncodeNodeDevices,
// EraseNextDeviceTypeFromAnnotation); HAMi's dialect in Project-HAMi/HAMi
// pkg/device (DeviceInfo) and pkg/device/nvidia (the registration and
// DeviceListScore).
//
// # Registration (node annotations, written by the agent)
//
//   - volcano.sh/node-vgpu-register: "UUID,count,devmem,type,health,mode,numa:"
//     per card (count: deviceSplitCount; devmem: memory after
//     deviceMemoryScaling, in MiB or the agent's gpuMemoryFactor units;
//     type: "NVIDIA-<product name>"; health: true/false; mode: hami-core,
//     mig or mps; numa: the card's NUMA node, -1 when unknown). Cards are
//     indexed in order. volcano-vgpu-device-plugin's EncodeNodeDevices
//     writes only the first five fields, newer ones the mode; the numa
//     field is this project's addition, placed last so that upstream's
//     readers, which read fields 0 to 4 (Volcano v1.10 decodeNodeDevices)
//     or 0 to 5, ignore it. DecodeRegister takes 5, 6 or 7 fields; without
//     numa a card is on NUMA 0. The format has no devcore (100).
//   - volcano.sh/node-vgpu-handshake: the agent writes
//     "Reported_<2006.01.02 15:04:05>"; Volcano v1.10's scheduler writes
//     "Requesting_<time>" when it sees a report and "Deleted_<time>" when no
//     new report comes within 60 s, after which the node has no usable
//     vGPUs (AgentDeleted).
//   - volcano.sh/node-vgpu-mig-geometry (only when a card is in mig mode):
//     per mig card "UUID,group:" with the catalogue group its MIG instances
//     form (empty when none). This project's addition; upstream keeps the
//     geometry in the agent's memory.
//
// # HAMi's dialect
//
// Nodes running HAMi's own NVIDIA device plugin register differently:
//
//   - hami.io/node-nvidia-register: a JSON list {id, index, count, devmem,
//     devcore, type, numa, mode, health}, or the older
//     "id,count,devmem,devcore,type,numa,health[,index,mode]:" form. A
//     scheduler reads it only when the node has no
//     volcano.sh/node-vgpu-register.
//   - hami.io/node-nvidia-score: pairwise link scores [{uuid, score: {uuid:
//     n}}] (higher is better: 10 cross-socket to 60 same board for the PCIe
//     path, plus 100 per NVLink; HAMi pkg/device/nvidia calculate_score.go).
//     This project's agent writes it too (EncodeScores), on HAMi's scale.
//
// Both dialects decode to the same Card with the same field checks, and
// the allocation format is shared; that is why they are one package
// rather than a separate hamigpu package, which would have to import this
// one's card validation and limits.
//
// # Allocation (pod annotations, written by the scheduler on the binding)
//
//   - volcano.sh/vgpu-ids-new and volcano.sh/devices-to-allocate: per
//     container "UUID,NVIDIA,mem,cores:" for each card, ";" between
//     containers. A MIG instance is "UUID[group-position]", the position
//     counting the geometry's instances in catalogue order. This project's
//     scheduler writes one entry per container (empty for containers
//     without vGPUs); when an init container or native sidecar has cards,
//     one entry per init container comes first, in spec order, then the
//     regular containers' (InitEntries, EntryRoles, EntryContainer): the
//     order the kubelet admits them in. Volcano v1.10 writes entries only
//     for the regular containers that ask for vGPUs. HAMi may list other
//     vendors' devices in the same value, with their own type.
//     volcano-vgpu-device-plugin maps entry i to pod.Spec.Containers[i],
//     so init entries are only written for nodes whose agent reads them
//     (RegisteredWithNUMA: this project's agent; HAMi's).
//   - volcano.sh/vgpu-node (the node), volcano.sh/vgpu-time (Unix seconds,
//     the order agents serve pods in), volcano.sh/bind-time (Unix seconds)
//     and volcano.sh/bind-phase: allocating.
//
// The agent consumes devices-to-allocate container by container (Consume
// empties the next entry with NVIDIA cards) and sets bind-phase to success
// when none is left, or failed when it refuses the allocation;
// vgpu-ids-new stays as the durable record accounting reads.
//
// # What a pod holds (phases.go)
//
// A card is charged what the pod holds of it at its peak, Peak: regular
// init containers run one at a time beside the sidecars declared before
// them, regular containers together beside every sidecar; per card, each
// of memory, cores and holders is the largest sum over one such phase.
// For pods without init entries that is every entry summed, as before.
// HAMi's scheduler counts the same (CollapseInitContainerUsage).
//
// # HAMi's allocation (hamialloc.go)
//
// For nodes HAMi's NVIDIA device plugin serves: hami.io/vgpu-devices-to-
// allocate and hami.io/vgpu-devices-allocated, the same card entries with
// ";" after every container entry and, as HAMi v2.9 indexes them, the init
// containers' entries first (with their cards when they have some); hami.io/vgpu-node, hami.io/vgpu-time,
// hami.io/bind-time and hami.io/bind-phase; the node lock
// hami.io/mutex.lock ("<RFC 3339>,<ns>,<pod>", protocol/nodelock). The
// plugin empties devices-to-allocate entry by entry and sets bind-phase
// success once no NVIDIA card is left.
//
// # Pod annotations users set
//
// volcano.sh/vgpu-mode (hami-core | mig | mps), nvidia.com/use-gputype and
// nvidia.com/nouse-gputype, volcano.sh/vgpu-use-gpuuuid and
// volcano.sh/vgpu-nouse-gpuuuid, volcano.sh/vgpu-podgroup-policy (spread),
// hami.io/gpu-scheduler-policy, hami.io/node-scheduler-policy and
// nvidia.com/numa-bind; backends/vgpu documents what they do.
//
// # Limits and errors
//
// Decoders refuse what no real node or pod writes, with errors naming the
// annotation or container entry, the field, the value and what is allowed:
// see the Max constants. Every number, in both dialects and in JSON, is
// read only as strconv.FormatInt writes it (protocol/internal/wireint): "0"
// devcore is a whole card in either dialect, "00", "+0" and "-0" are
// refused in both. They check the syntax and the limits only;
// whether a card exists on the node, or a MIG group in its geometry, is for
// the reader to check against its own view of the node.
package vgpuproto
