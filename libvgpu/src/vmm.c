/*
 * vmm.c - virtual memory management: physical allocations made with
 * cuMemCreate on a device are counted until their last handle is released.
 *
 * cuMemRetainAllocationHandle returns the same handle value with one more
 * reference (CUDA documents this), so the ledger keeps a reference count and
 * only the final cuMemRelease gives the memory back.
 */
#define _GNU_SOURCE
#include "hooks.h"

VGPU_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
				 const CUmemAllocationProp *prop, unsigned long long flags)
{
	struct vgpu_resv rv = {.idx = -1};
	VGPU_ENTER_CUDA(cuMemCreate);
	/* Host and host-NUMA locations do not use device memory. */
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
	VGPU_ENTER_CUDA(cuMemRetainAllocationHandle);
	CUresult res = REAL(cuMemRetainAllocationHandle)(handle, addr);
	if (res == CUDA_SUCCESS && handle != NULL && vgpu_counting())
		vgpu_ledger_retain(VGPU_K_VMM, *handle);
	return res;
}

VGPU_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuMemRelease);
	int left = vgpu_counting() ? vgpu_ledger_release_ref(VGPU_K_VMM, handle, &e) : -1;
	CUresult res = REAL(cuMemRelease)(handle);
	if (left < 0)
		return res;
	if (res != CUDA_SUCCESS) {
		/* Undo: the reference is still held. */
		if (left == 0)
			vgpu_ledger_add(&e);
		else
			vgpu_ledger_retain(VGPU_K_VMM, handle);
	} else if (left == 0) {
		vgpu_uncharge(e.idx, e.bytes);
	}
	return res;
}
