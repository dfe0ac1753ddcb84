// Package nvmlmock builds go-nvml's own mock NVML servers (dgxa100, dgxh100,
// dgxh200, dgxb200 from github.com/NVIDIA/go-nvml/pkg/nvml/mock) for tests and
// the demo, selected by the agent's --nvml=mock:<machine> flag.
//
// The mock servers leave some NVML calls unimplemented (calling them panics).
// New fills in the ones the node agent uses, keeping the mock's own state as
// the source of truth: event sets and device event registration, NUMA node,
// utilisation, and MIG device handles derived from the mock's GPU and compute
// instances. GPU UUIDs are made deterministic (derived from the machine name
// and index) so that demo and test annotations can name them. InjectEvent,
// SetUtilization and SetMemoryUsed let a test or the demo drive the hardware
// state; FollowEvents injects events written to a file (EnvEvents), so a
// test can drive the agent's mock from outside its process. Nothing in this
// package is used with the real library.
package nvmlmock
