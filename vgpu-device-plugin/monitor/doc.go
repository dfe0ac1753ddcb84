// Package monitor is the node agent's Prometheus exporter: host GPU memory
// and utilisation from NVML and, per container, device memory used and its
// limit and SM utilisation read from the shared-region files libvgpu keeps.
//
// # Shared regions
//
// Allocate gives each container the host directory
// <cache-dir>/containers/<pod UID>_<container> mounted at /tmp/vgpu, and
// CUDA_DEVICE_MEMORY_SHARED_CACHE=/tmp/vgpu/<id>.cache. The agent creates
// that file empty, in a directory the container cannot write to, and
// libvgpu sizes and formats it (allocate/cachedir.go has the modes); the
// exporter opens regions without following symlinks and only if they are
// regular files. Its layout is libvgpu/include/vgpu_region.h (the single definition,
// repeated in libvgpu/REGION.md), mirrored here in region.go. The tests
// compile a C program against the header and compare every offset and
// constant with the Go mirror, so a layout change cannot go unnoticed. A
// file whose magic or version differs is refused, as the header requires.
//
// # Metrics
//
// Names and labels follow volcano-vgpu-device-plugin's vgpu-monitor, so its
// dashboards keep working:
//
//   - HostGPUMemoryUsage{deviceidx, deviceuuid}: bytes used on the card.
//   - HostCoreUtilization{deviceidx, deviceuuid}: GPU utilisation, percent.
//   - vGPU_device_memory_usage_in_bytes{podnamespace, podname, ctrname,
//     vdeviceid, deviceuuid}: memory the container's processes hold.
//   - vGPU_device_memory_limit_in_bytes{...}: the container's limit.
//   - vGPU_device_sm_utilization_percent{...}: the container's SM use.
//   - vGPU_device_sm_limit_percent{...}: its CUDA_DEVICE_SM_LIMIT (0: none).
//
// # Clean-up
//
// Directories of pods no longer on the node are removed once they are older
// than a grace period (Cleaner), so files of deleted pods do not pile up.
//
// # Utilisation switch
//
// The Switcher writes each region's util_switch words: a container that has
// a card to itself among the node's pods runs unthrottled (its SM share
// would only leave the card idle). A container holds its cards from its
// Allocate on: until libvgpu formats its region, the cards file the
// allocator wrote beside it (allocate.CardsFile) names them, and the
// allocator kicks the Switcher (Kick), so the limit is enforced again
// before the newcomer starts rather than at the next pass. Before, a
// newcomer beside a container that ran alone got half the card instead of
// its share for up to a pass (5 s): e2e's arrival test.
//
// # Task priority
//
// The Prioritizer relays, every 50 ms, the newest high-priority launch
// stamp (prio_launch_ns[0], CUDA_TASK_PRIORITY=0) of the other containers on
// each card into every region on that card (peer_high_ns), so libvgpu in a
// low-priority container holds its kernel launches while a high-priority
// neighbour is launching (libvgpu/src/priority.c). It keeps open only the
// regions on cards where a high-priority container shares the card, and
// looks for regions that appeared or went every 500 ms
// (DefaultPriorityRescan), so a pass reads a few words per such region
// instead of scanning the cache directory.
package monitor
