// Package nvmlmock builds go-nvml's own mock NVML servers (dgxa100, dgxh100,
// dgxh200, dgxb200 from github.com/NVIDIA/go-nvml/pkg/nvml/mock) and two
// PCIe servers made of go-nvml's mock types (pcie-h100x8: 8 x H100 PCIe
// with NVLink bridges between pairs; pcie-a30x4: 4 x A30 without NVLink),
// for tests and the demo, selected by the agent's --nvml=mock:<machine>
// flag.
//
// The mock servers leave some NVML calls unimplemented (calling them panics).
// New fills in the ones the node agent uses, keeping the mock's own state as
// the source of truth: event sets and device event registration,
// utilisation, and MIG device handles derived from the mock's GPU and compute
// instances. It also gives each machine its topology (topology.go): PCI bus
// IDs, NUMA nodes through the memory and CPU affinity (GetNumaNodeId is
// NOT_SUPPORTED, as on any x86 server), PCIe common ancestors and NVLinks
// (state, remote PCI info, remote device type: GPU or NVSwitch), answering
// INVALID_ARGUMENT or NOT_SUPPORTED where a real driver does. The DGX A100
// has the real machine's layout; the other DGX machines a plausible one.
//
// GPU UUIDs are deterministic: derived from the machine name and index, and
// from the seed given WithSeed (the agent passes its node name), so that
// simulated nodes do not repeat each other's UUIDs. InjectEvent,
// SetUtilization and SetMemoryUsed let a test or the demo drive the hardware
// state; FollowEvents injects events written to a file (EnvEvents), so a
// test can drive the agent's mock from outside its process. Nothing in this
// package is used with the real library.
package nvmlmock
