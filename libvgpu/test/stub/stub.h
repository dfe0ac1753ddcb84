/*
 * stub.h - shared definitions of the fake CUDA driver and NVML used by the
 * test suite and the benchmark. The stubs simulate devices with memory
 * accounting and kernels that keep a device busy for time proportional to
 * grid size / SM count, and record what reached them.
 *
 * Environment (read once at load):
 *   VGPU_STUB_STATE     file shared by all processes (default: per process)
 *   VGPU_STUB_DEVICES   device count (default 3)
 *   VGPU_STUB_MEM       bytes per device (default 16 GiB)
 *   VGPU_STUB_SM        SMs per device (default 16)
 *   VGPU_STUB_WAVE_NS   time one full wave of blocks occupies a device (default 250 us)
 *   VGPU_STUB_CTX_MEM   device memory a context takes (default 64 MiB)
 */
#ifndef VGPU_STUB_H
#define VGPU_STUB_H

#include <stdint.h>

#define STUB_MAX_DEV 8
#define STUB_MAX_PROC 512
#define STUB_MAGIC UINT64_C(0x5354554256475055)

struct stub_proc {
	int32_t pid;                /* 0 = free */
	int32_t pad;
	uint64_t first_ns;
	uint64_t enq_ns;            /* total busy time enqueued */
	uint64_t busy_until_ns;     /* end of this process's queued work */
};

struct stub_dev {
	uint64_t total;
	uint64_t used;
	int32_t sm;
	int32_t pad;
	char uuid[64];
	struct stub_proc procs[STUB_MAX_PROC];
};

struct stub_shared {
	uint64_t magic;
	int32_t ndev;
	int32_t pad;
	uint64_t wave_ns;
	uint64_t max_queue_ns;
	uint64_t ctx_mem;
	struct stub_dev dev[STUB_MAX_DEV];
};

/* What reached the stub driver in this process. */
struct stub_stats {
	uint64_t alloc_calls;
	uint64_t free_calls;
	uint64_t launch_calls;
	uint64_t last_blocks;
	uint64_t held[STUB_MAX_DEV];    /* device bytes this process holds */
};

struct stub_shared *vgpuStubShared(void);
struct stub_stats *vgpuStubStats(void);
uint64_t vgpuStubBusyNs(int dev, int pid);
uint64_t vgpuStubNowNs(void);

#endif /* VGPU_STUB_H */
