//go:build e2e

// Package agentnvml runs the node agent's production NVML path against the
// fake node: go-nvml loading libvgpu's stub libnvidia-ml.so.1 for real
// (nvml.New(nvml.WithLibraryPath(...))), the stub in remote mode reaching
// the fake GPU driver (e2e/fakedriver) started with device nodes, as on a
// real node. The tests run the agent's own code (vgpu-device-plugin/nvidia
// Discover and its topology, the health monitor's event loop) and judge
// what it found by the driver's configuration alone: UUIDs, names, memory,
// minor numbers, NUMA nodes, PCIe levels and NVLinks as configured, an Xid
// injected into the driver reaching the monitor as an unhealthy card.
//
// A missing symbol would kill the agent on a real node ("symbol lookup
// error": go-nvml binds the C functions lazily), so the package also lists
// every NVML method the agent's production packages call (by type, from
// their source), resolves each to the C symbols go-nvml binds for it given
// the stub's exports (AgentMethods, Binder), and checks the stub exports
// them all. CallStub reaches the stub's C functions directly, for the
// documented errors of arguments go-nvml never passes (short buffers, NULL
// pointers, invalid handles, levels and scopes).
//
// The stub is loaded once per test process (its device list comes from the
// driver at the first nvmlInit), so TestMain starts one driver for every
// test. The tests need the C toolchain (make -C libvgpu builds the stub)
// and run in the host's mount namespace, which the driver grants every card.
package agentnvml
