// Package nvidia is the node agent's view of the NVIDIA hardware: discovery of
// the GPUs through NVML, the cards as the node registers them once the device
// configuration (split count, memory and core scaling, memory factor, per-node
// overrides and device filters) is applied, and MIG partitioning.
//
// All hardware access goes through github.com/NVIDIA/go-nvml's nvml.Interface,
// passed in by the caller: production passes nvml.New(), tests and the demo
// pass one of go-nvml's mock servers (see package nvmlmock). Nothing here keeps
// package-level state.
//
// NVML failures are returned wrapped with the operation and the device; the
// nvml.Return value stays in the chain, so callers can test for a specific
// code with errors.Is(err, nvml.ERROR_NOT_SUPPORTED). The package's own
// failures are the sentinel errors in errors.go.
//
// # Topology
//
// Discover also reads each GPU's NUMA node and its link to every other GPU
// (topology.go): the NUMA node from GetNumaNodeId where the GPU is itself a
// NUMA node, otherwise from GetMemoryAffinity with NUMA-node scope (the CPU
// affinity names CPUs, not a node, and is not used); the link from
// GetTopologyCommonAncestor and the NVLinks (GetNvLinkState over links 0 to
// NVLINK_MAX_LINKS-1, then GetNvLinkRemoteDeviceType and
// GetNvLinkRemotePciInfo: links whose remote PCI bus ID is the other GPU,
// or, when both GPUs reach NVSwitches, the smaller switch link count), as
// HAMi's device plugin reads them (HAMi pkg/device/nvidia/links.go).
// Topology is optional: NOT_SUPPORTED, INVALID_ARGUMENT or any failure of
// these calls leaves the fact unknown (NUMA -1, no link), never fails
// discovery. LinkScore puts a link on HAMi's score scale (score.go) and
// Inventory.Scores gives the matrix the agent publishes as
// hami.io/node-nvidia-score.
package nvidia
