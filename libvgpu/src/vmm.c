/*
 * vmm.c - virtual memory management: physical memory made with cuMemCreate on
 * a device is counted for as long as the driver keeps it.
 *
 * The CUDA Driver API reference (cuMemRelease, cuMemUnmap) says the memory
 * "will be freed when all outstanding mappings to the memory are unmapped and
 * when all outstanding references to the handle ... are also released", and
 * the programming guide's idiom is create, map, release: the handle is often
 * released right after mapping, while the memory stays in use. So a handle is
 * uncounted only when both its references (cuMemCreate and every
 * cuMemRetainAllocationHandle, which returns the same handle value) and its
 * mappings (cuMemMap; cuMemUnmap unmaps whole mapped ranges) are gone. Memory
 * on other locations (host, host NUMA) is not device memory and not counted.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "hooks.h"

VGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				 const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct vgpu_resv rv = {.idx = -1};
	VGPU_ENTER_CUDA(cuMemCreate);
	if (prop != NULL && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
	    prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
		CUresult res = vgpu_reserve_dev(prop->location.id, size, &rv);
		if (res != CUDA_SUCCESS)
			return res;
	}
	CUresult res = REAL(cuMemCreate)(handle, size, prop, flags);
	vgpu_settle(&rv, res, VGPU_K_VMM, handle ? *handle : 0);
	return res;
}

VGPU_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuMemRetainAllocationHandle);
	CUresult res = REAL(cuMemRetainAllocationHandle)(handle, addr);
	if (res == CUDA_SUCCESS && handle != NULL && vgpu_counting())
		vgpu_ledger_vmm_adjust(*handle, +1, 0, &e);
	return res;
}

/* Nothing in this process holds the memory any more; an importer may (share.c). */
static void vmm_gone(const struct vgpu_entry *e)
{
	if ((e->flags & VGPU_F_EXPORTED) != 0)
		vgpu_share_linger(e);
	else
		vgpu_uncharge(e->idx, e->bytes);
}

VGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuMemRelease);
	int gone = vgpu_counting() ? vgpu_ledger_vmm_adjust(handle, -1, 0, &e) : -1;
	CUresult res = REAL(cuMemRelease)(handle);
	if (gone < 0)
		return res;
	if (res != CUDA_SUCCESS) {
		/* Undo: the reference is still held. */
		if (gone == 1) {
			e.refs = 1;
			vgpu_ledger_add(&e);
		} else {
			vgpu_ledger_vmm_adjust(handle, +1, 0, &e);
		}
	} else if (gone == 1) {
		vmm_gone(&e);
	}
	return res;
}

VGPU_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
			      CUmemGenericAllocationHandle handle, unsigned long long flags)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuMemMap);
	CUresult res = REAL(cuMemMap)(ptr, size, offset, handle, flags);
	/* Handles libvgpu does not count (host memory, imported ones) are not tracked. */
	if (res == CUDA_SUCCESS && vgpu_counting() && vgpu_ledger_vmm_adjust(handle, 0, +1, &e) >= 0) {
		struct vgpu_entry m = {.key = ptr, .bytes = size, .owner = (void *)(uintptr_t)handle,
				       .idx = e.idx, .kind = VGPU_K_MAP, .refs = 1};
		vgpu_ledger_add(&m);
	}
	return res;
}

/* Drops one mapping of a counted handle; uncounts it when nothing holds it. */
static void unmapped(const struct vgpu_entry *m)
{
	struct vgpu_entry e;
	if (vgpu_ledger_vmm_adjust((uint64_t)(uintptr_t)m->owner, 0, -1, &e) == 1)
		vmm_gone(&e);
}

VGPU_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
	VGPU_ENTER_CUDA(cuMemUnmap);
	if (!vgpu_counting())
		return REAL(cuMemUnmap)(ptr, size);
	/*
	 * The mappings leave the ledger before the driver call, so that no other
	 * thread can map the same addresses meanwhile and be confused with them;
	 * they come back if the driver refuses.
	 */
	struct vgpu_entry one, *taken = &one;
	size_t n = 0, cap = 1;
	while (vgpu_ledger_take_in(VGPU_K_MAP, ptr, ptr + size, &taken[n])) {
		if (++n < cap)
			continue;
		struct vgpu_entry *more = malloc(2 * cap * sizeof(*more));
		if (more == NULL)
			break;  /* out of host memory: the rest stay mapped in the books */
		for (size_t i = 0; i < n; i++)
			more[i] = taken[i];
		if (taken != &one)
			free(taken);
		taken = more;
		cap *= 2;
	}
	CUresult res = REAL(cuMemUnmap)(ptr, size);
	for (size_t i = 0; i < n; i++) {
		if (res == CUDA_SUCCESS)
			unmapped(&taken[i]);
		else
			vgpu_ledger_add(&taken[i]);
	}
	if (taken != &one)
		free(taken);
	return res;
}
