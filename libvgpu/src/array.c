/*
 * array.c - CUDA arrays and mipmapped arrays.
 *
 * The driver does not say how much memory an array takes, so the charge is
 * the texel data size computed from the descriptor, saturating (a descriptor
 * whose size overflows is refused as too large, never charged as a wrapped
 * small number). Driver padding is not counted: cuArrayGetMemoryRequirements,
 * the only report of an array's real size, answers only for arrays created
 * with CUDA_ARRAY3D_DEFERRED_MAPPING (CUDA Driver API reference), and those
 * own no memory at creation; their backing comes from cuMemCreate, which is
 * counted in vmm.c. Sparse arrays likewise.
 */
#define _GNU_SOURCE
#include "hooks.h"

static uint64_t channel_bytes(int format)
{
	switch (format) {
	case CU_AD_FORMAT_UNSIGNED_INT8:
	case CU_AD_FORMAT_SIGNED_INT8:
		return 1;
	case CU_AD_FORMAT_UNSIGNED_INT16:
	case CU_AD_FORMAT_SIGNED_INT16:
	case CU_AD_FORMAT_HALF:
		return 2;
	case CU_AD_FORMAT_UNSIGNED_INT32:
	case CU_AD_FORMAT_SIGNED_INT32:
	case CU_AD_FORMAT_FLOAT:
		return 4;
	default:
		return 4;   /* newer formats: never undercount by much */
	}
}

static uint64_t at_least_one(uint64_t v) { return v ? v : 1; }

/* Bytes of one mip level (level 0 for plain arrays). */
static uint64_t level_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned level)
{
	uint64_t w = at_least_one(d->Width >> level);
	uint64_t h = at_least_one(d->Height >> level);
	/* Layers and cube faces do not shrink with the mip level; depth does. */
	uint64_t depth = (d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP))
				 ? at_least_one(d->Depth)
				 : at_least_one(d->Depth >> level);
	uint64_t texel = channel_bytes(d->Format) * at_least_one(d->NumChannels);
	return vgpu_mul_sat(vgpu_mul_sat(vgpu_mul_sat(w, h), depth), texel);
}

static uint64_t array_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned levels)
{
	uint64_t total = 0;
	if (d == NULL || (d->Flags & (CUDA_ARRAY3D_SPARSE | CUDA_ARRAY3D_DEFERRED_MAPPING)))
		return 0;
	for (unsigned l = 0; l < at_least_one(levels) && l < 64; l++) {
		uint64_t b = level_bytes(d, l);
		total = total > UINT64_MAX - b ? UINT64_MAX : total + b;
	}
	return total;
}

static CUresult charge(uint64_t bytes, struct vgpu_resv *rv)
{
	rv->idx = -1;
	if (bytes == 0)
		return CUDA_SUCCESS;
	return vgpu_reserve_current(bytes, rv);
}

VGPU_EXPORT CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *desc)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuArrayCreate_v2);
	CUDA_ARRAY3D_DESCRIPTOR d3 = {0};
	if (desc != NULL)
		d3 = (CUDA_ARRAY3D_DESCRIPTOR){desc->Width, desc->Height, 0, desc->Format,
					       desc->NumChannels, 0};
	CUresult res = charge(desc ? array_bytes(&d3, 1) : 0, &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuArrayCreate_v2)(pHandle, desc);
	vgpu_settle(&rv, res, VGPU_K_ARRAY, pHandle ? (uint64_t)(uintptr_t)*pHandle : 0);
	return res;
}

VGPU_EXPORT CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *desc)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuArrayCreate);
	CUDA_ARRAY3D_DESCRIPTOR d3 = {0};
	if (desc != NULL)
		d3 = (CUDA_ARRAY3D_DESCRIPTOR){desc->Width, desc->Height, 0, desc->Format,
					       desc->NumChannels, 0};
	CUresult res = charge(desc ? array_bytes(&d3, 1) : 0, &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuArrayCreate)(pHandle, desc);
	vgpu_settle(&rv, res, VGPU_K_ARRAY, pHandle ? (uint64_t)(uintptr_t)*pHandle : 0);
	return res;
}

VGPU_EXPORT CUresult cuArray3DCreate_v2(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR *desc)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuArray3DCreate_v2);
	CUresult res = charge(array_bytes(desc, 1), &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuArray3DCreate_v2)(pHandle, desc);
	vgpu_settle(&rv, res, VGPU_K_ARRAY, pHandle ? (uint64_t)(uintptr_t)*pHandle : 0);
	return res;
}

VGPU_EXPORT CUresult cuArray3DCreate(CUarray *pHandle, const CUDA_ARRAY3D_DESCRIPTOR_v1 *desc)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuArray3DCreate);
	CUDA_ARRAY3D_DESCRIPTOR d3 = {0};
	if (desc != NULL)
		d3 = (CUDA_ARRAY3D_DESCRIPTOR){desc->Width, desc->Height, desc->Depth,
					       desc->Format, desc->NumChannels, desc->Flags};
	CUresult res = charge(desc ? array_bytes(&d3, 1) : 0, &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuArray3DCreate)(pHandle, desc);
	vgpu_settle(&rv, res, VGPU_K_ARRAY, pHandle ? (uint64_t)(uintptr_t)*pHandle : 0);
	return res;
}

VGPU_EXPORT CUresult cuArrayDestroy(CUarray hArray)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuArrayDestroy);
	bool had = vgpu_forget(VGPU_K_ARRAY, (uint64_t)(uintptr_t)hArray, &e);
	CUresult res = REAL(cuArrayDestroy)(hArray);
	vgpu_finish_free(had, &e, res);
	return res;
}

VGPU_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
					    const CUDA_ARRAY3D_DESCRIPTOR *desc,
					    unsigned int numMipmapLevels)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuMipmappedArrayCreate);
	CUresult res = charge(array_bytes(desc, numMipmapLevels), &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuMipmappedArrayCreate)(pHandle, desc, numMipmapLevels);
	vgpu_settle(&rv, res, VGPU_K_MIPMAP, pHandle ? (uint64_t)(uintptr_t)*pHandle : 0);
	return res;
}

VGPU_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuMipmappedArrayDestroy);
	bool had = vgpu_forget(VGPU_K_MIPMAP, (uint64_t)(uintptr_t)hMipmappedArray, &e);
	CUresult res = REAL(cuMipmappedArrayDestroy)(hMipmappedArray);
	vgpu_finish_free(had, &e, res);
	return res;
}
