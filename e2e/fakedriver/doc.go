// Package fakedriver is a fake GPU driver daemon for the node-side
// end-to-end tests: it stands where the NVIDIA kernel driver stands, below
// libvgpu, and keeps the ground truth the tests judge libvgpu by. libvgpu's
// stub libcuda.so.1 and libnvidia-ml.so.1 (libvgpu/test/stub), running in
// real containers, speak to it over a Unix stream socket with the line
// protocol of PROTOCOL.md in this directory. The test harness runs the
// daemon in-process (Start) and reads the truth directly (Stats, Peak,
// ProcessPeak, GroupPeak, ProcessBusy, Processes), never through libvgpu's
// own numbers.
//
// Start serves one socket on which every connection may use every card (a
// harness names the container's cards to the stub with
// NVIDIA_VISIBLE_DEVICES). StartDeviceNodes serves a real node: a control
// socket and one node per card in a directory (ControlNode, CardNode), which
// a container runtime mounts at /dev/nvidiactl and /dev/nvidia<minor>; a
// request on a card is granted only to a process whose /dev/nvidia<minor>
// is the driver's own node (nodes.go), as the kernel driver serves only the
// cards whose nodes a container was given. ListCards (cards.List) is the
// host-side client a container runtime uses to learn the cards.
//
// # What it models, and after what
//
// Processes by host pid. The NVIDIA driver knows a process by its pid in the
// host's (the driver's) pid namespace: NVML's process lists
// (nvmlDeviceGetComputeRunningProcesses, nvmlDeviceGetProcessUtilization in
// the NVML API reference) carry host pids, which is why nvidia-smi run
// inside a container shows pids the container cannot see. The daemon gets
// the same pid from the connection's SO_PEERCRED, which the kernel records
// at connect(2) and translates into the reading process's pid namespace
// (unix(7)). A process keeps one connection for its lifetime; when the last
// connection of a pid ends (exit, SIGKILL, close) the daemon frees its
// memory, drops its contexts and discards its queued work, as the kernel
// driver does when a process exits. The kernel driver has done so before
// the exit is visible to the parent's wait(2); so that a request sent after
// such a wait never sees the dead process's memory, every request that
// reads or takes memory first counts the end of each connection whose peer
// has hung up (poll(2)), before its goroutine reads the EOF (Driver.reap).
//
// Memory. Each device has a capacity; ALLOC beyond the free memory is OOM
// (CUDA_ERROR_OUT_OF_MEMORY). Memory is counted per process and device, with
// the device's peak, each process's peak and, for groups of pids (a
// container: SetGroup or Config.GroupOf), the peak of their sum, so a test
// can assert that a container never held more than its limit at any
// instant, not just at the instants it looked.
//
// Pinned host memory. cuMemHostAlloc's page-locked host memory mapped into
// a card's address space (CU_MEMHOSTALLOC_DEVICEMAP, cuMemHostGetDevicePointer
// in the CUDA Driver API reference, "Memory Management") is host memory:
// HOSTALLOC records it for the process and the card whose context mapped it,
// outside the card's accounting (a full card grants it; MEM, PROCS and the
// card peaks never include it), and the process's end unpins it. Stats and
// GroupPeakWithHost give a group's card plus pinned memory, the bound of an
// over-committed share (host.go).
//
// Shared memory. An allocation one process exports (EXPORT: a CUDA IPC or
// VMM shareable handle) and others import (IMPORT) is the exporter's
// memory, taken once; freed by its exporter (UNEXPORT) or left by its
// exit while importers hold it, it stays on the device, counted to no
// process, until the last importer lets go (shared.go).
//
// Contexts. A process with a context on a device is listed on it (PROCS,
// like nvmlDeviceGetComputeRunningProcesses), with the memory it holds.
//
// Execution. Work is whole-device time. Each device runs its processes'
// queued work by processor sharing in 1 ms ticks: the tick is split evenly
// among the processes with work queued, and what one needs less of goes to
// the others. That is what time-slicing between contexts gives on a real
// GPU at a coarser grain: one busy process gets the whole device, two get
// half each. LAUNCH is held back while the caller has more than 4 ms queued
// on the device, like cuLaunchKernel blocking on a full push buffer; SYNC
// returns once the caller's queue is empty, like cuCtxSynchronize.
//
// Facts. Each card's NVML facts come from its Device in the configuration
// (minor number, PCI bus ID and ids, compute capability, MIG capability,
// NUMA node, CPU affinity, PCIe host bridge and switch, NVLinks; package cards)
// and from the driver's version, so the node agent reading them through the
// stub's NVML and the driver agree by construction. INFO, TOPO and SYS carry
// them (PROTOCOL.md, "NVML facts and events").
//
// Events. Each connection may hold an NVML event set (EVREG, EVWAIT);
// InjectXid raises an Xid critical error on a card for every set registered
// for it, which the stub's nvmlEventSetWait_v2 delivers.
//
// Utilisation. Every 100 ms each device closes a sample period and keeps
// the last 64. PUTIL follows nvmlDeviceGetProcessUtilization: one entry per
// process with samples newer than the caller's last-seen timestamp
// (CLOCK_REALTIME microseconds), carrying the newest sample's timestamp and
// the mean SM utilisation of those samples. DUTIL follows
// nvmlDeviceGetUtilizationRates: the percentage of the last complete period
// during which any work ran.
//
// # What it does not model
//
// Memory belongs to the process, not to a context, and has no addresses:
// no fragmentation, alignment or allocation granularity, and destroying a
// context frees nothing (the client frees first). One queue per process
// and device: no streams, no concurrent kernels, no MPS, no MIG, no
// compute modes, no context-switch cost, no SM partitioning or memory
// bandwidth; only SM utilisation, not memory, encoder or decoder
// utilisation. No MIG partitioning (a MIG capable card stays in MIG mode
// disabled). No ECC, clocks or power; of the events only Xid errors, and
// an Xid changes nothing on its card (no lost GPU, no reset). A pid
// reused by a new process continues the old record's peaks and service.
// A forked child that uses its parent's connection is the parent: the
// kernel's credentials are those of the process that connected.
package fakedriver
