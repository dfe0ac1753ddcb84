/*
 * host.c - oversubscription: what the card cannot hold, within the
 * container's limit, is served from host memory.
 *
 * With deviceMemoryScaling > 1 the scheduler shares out more memory than a
 * card has and the node agent sets CUDA_OVERSUBSCRIBE=true. Every container
 * stays within its limit, yet together they can fill the card. Then the
 * driver's own cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY although the
 * container has not used its share, and libvgpu serves the request from
 * page-locked host memory mapped into the device's address space:
 * cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) and
 * cuMemHostGetDevicePointer_v2 (CUDA Driver API reference, "Memory
 * Management"). Kernels read and write it over the bus ("zero-copy", CUDA C++
 * Best Practices Guide): correct, but at PCIe or NVLink-C2C speed instead of
 * device memory speed, so it trades speed for not failing. It is safe
 * because it is plain driver-managed memory: the device pointer works in
 * kernels and copies, cuMemFree of it is turned into cuMemFreeHost, it is
 * charged to the container's limit like device memory (the limit is what
 * the container was promised) and published separately (host_mib in the
 * region, vGPU_device_memory_host_backed_in_bytes in the exporter). What it
 * cannot do: IPC handles (cuIpcGetMemHandle) of such memory fail, as for any
 * host memory. Only cuMemAlloc_v2 falls back: 32-bit cuMemAlloc cannot hold
 * the pointer, and pools, arrays and VMM have their own placement.
 */
#define _GNU_SOURCE
#include "hooks.h"

CUresult vgpu_host_fallback(const struct vgpu_resv *rv, CUdeviceptr *dptr, size_t bytes)
{
	static int said;
	void *host = NULL;
	CUdeviceptr dev = 0;
	if (REAL(cuMemHostAlloc) == NULL || REAL(cuMemHostGetDevicePointer_v2) == NULL ||
	    REAL(cuMemFreeHost) == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	CUresult res = REAL(cuMemHostAlloc)(&host, bytes,
					     CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
	if (res != CUDA_SUCCESS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	res = REAL(cuMemHostGetDevicePointer_v2)(&dev, host, 0);
	if (res != CUDA_SUCCESS) {
		REAL(cuMemFreeHost)(host);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
		VGPU_LOG(VGPU_LOG_INFO, "device %d is full: serving %llu bytes within the limit from "
			 "host memory (CUDA_OVERSUBSCRIBE)", rv->idx, (unsigned long long)bytes);
	struct vgpu_entry e = {.key = dev, .bytes = bytes, .owner = rv->ctx, .idx = rv->idx,
			       .kind = VGPU_K_HOST, .refs = 1, .aux = (uint64_t)(uintptr_t)host};
	vgpu_ledger_add(&e);
	vgpu_region_host(rv->idx, (int64_t)bytes);
	*dptr = dev;
	return CUDA_SUCCESS;
}

bool vgpu_host_free(CUdeviceptr dptr, CUresult *res)
{
	struct vgpu_entry e;
	if (!vgpu_cfg.oversubscribe || !vgpu_ledger_take(VGPU_K_HOST, dptr, &e))
		return false;
	*res = REAL(cuMemFreeHost)((void *)(uintptr_t)e.aux);
	if (*res != CUDA_SUCCESS) {
		vgpu_ledger_add(&e);
		return true;
	}
	vgpu_uncharge(e.idx, e.bytes);
	vgpu_region_host(e.idx, -(int64_t)e.bytes);
	return true;
}
