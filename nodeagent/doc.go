// Package nodeagent is the kit both node agents are built from: the NVIDIA
// agent (vgpu-device-plugin, cmd/vgpu-device-plugin) and the simulated
// Ascend agent (vnpu/agent, cmd/vnpu-agent). An agent adds only what is
// vendor-specific (discovery, health, the annotation values, the container
// environment); the kit holds the rest:
//
//   - this package: the options and flags every agent has (Options), the
//     run of an agent's parts as one group with the node-scoped informers
//     they share (Session), and the command skeleton (Main);
//   - deviceplugin: the kubelet device-plugin gRPC server, its
//     registration and re-registration when the kubelet restarts, and
//     ListAndWatch (deviceplugin/fakekubelet plays the kubelet in tests);
//   - registrar: the node registration annotations, written only when they
//     change, and the scheduler's handshake;
//   - allocation: what every Allocate shares (the pod protocol's writes,
//     waiting for the informer, refusal classes and their gRPC codes, the
//     allocation signature check);
//   - kube: the API server client, node-scoped informers, the patcher and
//     the event recorder.
//
// The kit must not depend on Volcano: the agents run on nodes, apart from
// the scheduler.
package nodeagent
