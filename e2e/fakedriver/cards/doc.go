// Package cards is the fake driver's model of the GPUs it serves: what a
// Device states (its NVML facts: minor number, PCI address and ids,
// compute capability, MIG capability, NUMA node, CPU affinity, PCIe host
// bridge and switch, NVLinks), their defaults and validation, and how the
// driver's INFO and TOPO answers report them, after the NVML API reference
// (nvmlDeviceGetPciInfo_v3, nvmlDeviceGetTopologyCommonAncestor,
// nvmlDeviceGetNvLinkRemotePciInfo_v2 and the neighbouring calls; see
// ../PROTOCOL.md, "NVML facts and events"). It holds no state: the driver
// (package fakedriver) resolves its configuration's devices once. List is
// the host-side client that reads the cards back from a running driver
// (HELLO, DEV), as a container runtime does before it sets up a container.
package cards
