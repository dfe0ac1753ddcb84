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
package nvidia
