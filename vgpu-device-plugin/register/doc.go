// Package register publishes the node's vGPU cards on the Node object in the
// format upstream Volcano's scheduler (v1.10 built-in vGPU) and
// volcano-vgpu-device-plugin use, and answers the scheduler's handshake.
//
// # Annotations written
//
//   - volcano.sh/node-vgpu-register: per card
//     "UUID,count,devmem,type,health,mode:" (count: deviceSplitCount; devmem:
//     memory after deviceMemoryScaling, in the agent's memory unit; type:
//     "NVIDIA-<product name>"; health: true/false; mode: hami-core, mig or
//     mps), as volcano-vgpu-device-plugin's EncodeNodeDevices writes it.
//   - volcano.sh/node-vgpu-handshake: "Reported_<2006.01.02 15:04:05>".
//     Volcano v1.10's scheduler writes "Requesting_<time>" when it sees a
//     report and drops the node's GPUs ("Deleted_<time>") if no new report
//     comes within 60 s; the agent answers a request or deletion no sooner
//     than HandshakeInterval after its previous report, so the exchange costs
//     one patch per interval on each side instead of a storm.
//   - volcano.sh/node-vgpu-mig-geometry (only when a card is in mig mode): per
//     mig card "UUID,group:" with the catalogue group its MIG instances form
//     (empty when none). This is this project's addition; upstream keeps the
//     geometry in the agent's memory.
//
// The Registrar is the node agent kit's (nodeagent/registrar) with the
// Answer handshake policy: it writes only what differs from the Node it last
// observed (from a node informer), so an unchanged node gets no patches, and
// it writes again when someone else changes or removes its annotations. This
// package says what the annotations are.
package register
