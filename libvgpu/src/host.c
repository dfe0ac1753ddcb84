/*
 * host.c - oversubscription: what the card cannot hold, within the
 * container's limit, is served from host memory.
 *
 * With deviceMemoryScaling > 1 the scheduler shares out more memory than a
 * card has and the node agent sets CUDA_OVERSUBSCRIBE=true. Every container
 * stays within its limit, yet together they can fill the card. Then the
 * driver's own allocation fails with CUDA_ERROR_OUT_OF_MEMORY although the
 * container has not used its share, and libvgpu serves the request from
 * page-locked host memory mapped into the device's address space:
 * cuMemHostAlloc(CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE) and
 * cuMemHostGetDevicePointer_v2 (CUDA Driver API reference, "Memory
 * Management"). Kernels read and write it over the bus ("zero-copy", CUDA C++
 * Best Practices Guide): correct, but at PCIe or NVLink-C2C speed instead of
 * device memory speed, so it trades speed for not failing. It is charged to
 * the container's limit like device memory (the limit is what the container
 * was promised: card plus host never exceeds it) and published separately
 * (host_mib in the region, vGPU_device_memory_host_backed_in_bytes in the
 * exporter).
 *
 * Host memory stands in only where what the reference promises of the
 * allocation holds for it, that is for plain linear memory named by a 64-bit
 * device pointer and freed with cuMemFree (turned into cuMemFreeHost here):
 *  - cuMemAlloc_v2: "linear memory on the device", usable by kernels and
 *    copies. Falls back.
 *  - cuMemAllocPitch_v2: linear memory too; the reference promises of the
 *    pitch only that it works with cuMemcpy2D and meets the alignment for
 *    texture binding (cuTexRefSetAddress2D: pitch aligned to
 *    CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, base to the texture
 *    alignment, which page-aligned host memory meets). Falls back, with the
 *    row width rounded up to 512 bytes (or the device's texture pitch
 *    alignment if larger), and that pitch times the height charged.
 * Every other family keeps the driver's CUDA_ERROR_OUT_OF_MEMORY, which its
 * reference lists, because host memory would break a promise it makes:
 *  - cuMemAlloc, cuMemAllocPitch (32-bit): the pointer may not fit.
 *  - cuMemAllocManaged: the one pointer is valid on the host and every
 *    device and the memory migrates (cuMemPrefetchAsync, cuMemAdvise);
 *    mapped host memory's device pointer "may or may not match" its host
 *    pointer and does not migrate.
 *  - cuMemAllocAsync, cuMemAllocFromPoolAsync: the memory belongs to a pool
 *    (its attributes, access, cuMemFreeAsync in stream order, export).
 *  - cuMemCreate: the caller names the physical location (prop->location);
 *    what it maps, exports and queries must be that allocation.
 *  - arrays and mipmapped arrays: opaque device layouts for the texture
 *    hardware, with no host form.
 *  - contexts: the driver's own device memory.
 * What mapped host memory cannot do: IPC handles (cuIpcGetMemHandle) of it
 * fail, as for any host memory. cuCtxDestroy frees it with the context that
 * allocated it ("memory allocations by cuMemAlloc(), cuMemAllocHost()"),
 * and so its charge and its published figure go with the context.
 */
#define _GNU_SOURCE
#include <stdint.h>

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

/*
 * Pitch of host-backed pitched memory: 512, the alignment memory.c's guess
 * charged, or the device's texture pitch alignment when that is larger.
 */
static uint64_t host_pitch_align(void)
{
	CUdevice dev;
	int idx, v = 0;
	if (REAL(cuDeviceGetAttribute) != NULL && vgpu_current_dev(&dev, &idx) == 0 &&
	    REAL(cuDeviceGetAttribute)(&v, CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, dev) == CUDA_SUCCESS &&
	    v > 512 && v <= (1 << 20) && (v & (v - 1)) == 0)
		return (uint64_t)v;
	return 512;
}

CUresult vgpu_host_fallback_pitch(struct vgpu_resv *rv, CUdeviceptr *dptr, size_t *pitch,
				  size_t width, size_t height)
{
	uint64_t a = host_pitch_align();
	if (width == 0 || height == 0 || width > VGPU_MAX_ALLOC)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t p = (width + a - 1) & ~(a - 1);
	uint64_t bytes = vgpu_mul_sat(p, height);
	if (bytes > VGPU_MAX_ALLOC || bytes > SIZE_MAX)
		return CUDA_ERROR_OUT_OF_MEMORY;
	/* Charge what the host allocation takes, not the guess made before the driver was asked. */
	if (bytes > rv->bytes && vgpu_charge(rv->idx, bytes - rv->bytes) != CUDA_SUCCESS)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (bytes < rv->bytes)
		vgpu_uncharge(rv->idx, rv->bytes - bytes);
	rv->bytes = bytes;
	CUresult res = vgpu_host_fallback(rv, dptr, (size_t)bytes);
	if (res == CUDA_SUCCESS)
		*pitch = (size_t)p;
	return res;
}

void vgpu_host_forget_owner(void *ctx)
{
	struct vgpu_entry e;
	if (!vgpu_cfg.oversubscribe)
		return;
	while (vgpu_ledger_take_owned(VGPU_K_HOST, ctx, &e)) {
		vgpu_uncharge(e.idx, e.bytes);
		vgpu_region_host(e.idx, -(int64_t)e.bytes);
	}
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
