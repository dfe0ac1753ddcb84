// Package ascendproto is HAMi's Ascend vNPU wire protocol between a scheduler
// and HAMi's Ascend device plugin: the keys, the encoders and the decoders,
// with one set of limits and one set of error texts. The scheduler backend
// (backends/ascend), the simulated node agent (vnpu/agent), config and the
// tests speak it through this package. It depends on nothing but the
// standard library.
//
// Upstream defines it in Project-HAMi/HAMi pkg/device/ascend (the keys,
// the registration it reads, the allocation it writes with
// EncodePodSingleDevice), pkg/device (DeviceInfo, ContainerDevice) and
// pkg/util (the bind phase and node lock), in HAMi's ascend-device-plugin
// (github.com/Project-HAMi/ascend-device-plugin: the registration it
// writes, RuntimeInfo, the Allocate environment) and in Volcano's hami
// Ascend device (volcano-sh/volcano pkg/scheduler/api/devices/ascend/hami).
//
// Most keys embed the chip type's commonWord, like Ascend910B3 (KeysFor).
//
// # Registration (node annotations, written by the device plugin)
//
//   - hami.io/node-register-<commonWord>: JSON list of HAMi DeviceInfo,
//     {"id", "index", "count", "devmem" (MiB), "devcore", "type", "numa",
//     "health", "custominfo": {"NetworkID": n}}, every key omitempty (a card
//     without "health" is unhealthy, without "count" takes no vNPU).
//   - hami.io/node-handshake-<commonWord>: "Reported_<time>" from the
//     plugin; "Requesting_<time>" or "Deleted_<time>" from a scheduler.
//     "Deleted_..." means the agent is gone (AgentDeleted).
//   - hami-vnpu-core: "true" when the node slices softly (hami-core),
//     "false" when it slices by templates.
//
// # Pod annotations users set
//
//   - huawei.com/vnpu-mode: hami-core asks for soft slicing.
//   - hami.io/use-<commonWord>-uuid, hami.io/no-use-<commonWord>-uuid:
//     comma-separated card IDs to keep or exclude.
//
// # Allocation (pod annotations, written by the scheduler on the binding)
//
//   - hami.io/<commonWord>-devices-to-allocate and
//     hami.io/<commonWord>-devices-allocated: "id,<commonWord>,memMiB,cores:"
//     per card, ";" after every container (HAMi EncodePodSingleDevice). The
//     device plugin consumes the first container by container (an empty
//     container is just ";"); accounting reads the second, which stays.
//     Template mode records the template's memory and cores 0.
//   - huawei.com/<commonWord>: JSON list per card, [{"UUID": id, "temp":
//     template}] in template mode (no temp for a whole card) or [{"UUID",
//     "memory", "core"}] in hami-core mode (HAMi RuntimeInfo; zero values
//     omitted).
//   - hami.io/vgpu-node, hami.io/vgpu-time, hami.io/bind-time,
//     predicate-time (Unix seconds) and hami.io/bind-phase: allocating,
//     which the device plugin moves to success once it served every
//     container, or failed when it refuses the allocation.
//
// The node lock is the node annotation hami.io/mutex.lock, which the device
// plugin releases once it served or refused the pod. Allocate answers
// carry ASCEND_VISIBLE_DEVICES (physical chip IDs) and, in template mode,
// ASCEND_VNPU_SPECS (the template).
//
// # Limits and errors
//
// Decoders refuse what no real node or pod writes, with errors naming the
// container or card, the field, the value and what is allowed: see the Max
// constants. Every number, in the comma form and in JSON (custominfo
// included), is read only as strconv.FormatInt writes it
// (protocol/internal/wireint): "00", "+0", "-0", 1.0 and 1e3 are refused. They check the syntax and the limits only; whether a card
// exists on the node, is of the reader's chip type or fits its memory is
// for the reader to check against its own view of the node.
package ascendproto
