// Package inventory decodes what a node registers for the vGPU backend
// (backends/vgpu): its cards from volcano.sh/node-vgpu-register, or HAMi's
// hami.io/node-nvidia-register when the node has none, the link scores of
// hami.io/node-nvidia-score, the card cordons of volcano.sh/vgpu-cordon and
// hami.io/device-cordon, and whether the handshake says the agent was
// deleted (Decode); and, per card model, the MIG geometries the device
// ConfigMap's nvidia.knownMigGeometries allow, with the instance a request
// takes (Layout).
//
// The wire formats, their limits and their sources are
// protocol/vgpuproto's; this package decides what the backend makes of
// them: which registration wins, which parts are left out with a warning
// (unreadable link scores, cordon entries naming no card) and which make
// the node's vGPUs unavailable (a malformed registration, an error naming
// the annotation, the card and the field). It holds no state: a decoded
// Inventory and a Layout are immutable, and the backend shares them
// between every copy of a node's devices.
package inventory
