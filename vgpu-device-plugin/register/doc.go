// Package register publishes the node's vGPU cards on the Node object in the
// format upstream Volcano's scheduler (v1.10 built-in vGPU) and
// volcano-vgpu-device-plugin use, and answers the scheduler's handshake. The
// annotations and their formats are protocol/vgpuproto's.
//
// # Annotations written
//
//   - volcano.sh/node-vgpu-register: the cards (count: deviceSplitCount;
//     devmem: memory after deviceMemoryScaling, in the agent's memory unit;
//     type: "NVIDIA-<product name>"; health; mode; numa: the card's NUMA
//     node, -1 when unknown, a 7th field upstream's readers ignore).
//   - hami.io/node-nvidia-score (when the driver reports any link between
//     the cards): the pair scores of nvidia.Inventory.Scores in HAMi's JSON
//     format and scale, so topology-aware placement works on this agent's
//     nodes as on HAMi's.
//   - volcano.sh/node-vgpu-handshake: "Reported_<time>". Volcano v1.10's
//     scheduler writes "Requesting_<time>" when it sees a report and drops
//     the node's GPUs ("Deleted_<time>") if no new report comes within 60 s;
//     the agent answers a request or deletion no sooner than
//     HandshakeInterval after its previous report, so the exchange costs one
//     patch per interval on each side instead of a storm.
//   - volcano.sh/node-vgpu-mig-geometry (only when a card is in mig mode):
//     the catalogue group each mig card's MIG instances form.
//
// The Registrar is the node agent kit's (nodeagent/registrar) with the
// Answer handshake policy: it writes only what differs from the Node it last
// observed (from a node informer), so an unchanged node gets no patches, and
// it writes again when someone else changes or removes its annotations. This
// package says what the annotations are.
package register
