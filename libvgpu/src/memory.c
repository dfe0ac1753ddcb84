/*
 * memory.c - linear device allocations (cuMemAlloc, cuMemAllocPitch,
 * cuMemAllocManaged, cuMemFree) and the memory queries that report the
 * container's share (cuMemGetInfo, cuDeviceTotalMem).
 */
#define _GNU_SOURCE
#include <limits.h>

#include "hooks.h"

CUresult vgpu_charge(int idx, uint64_t bytes)
{
	uint64_t limit = vgpu_cfg.mem_limit[idx];
	/* A size no device can have never touches the totals, limit or not. */
	if (bytes > VGPU_MAX_ALLOC) {
		VGPU_LOG(VGPU_LOG_INFO, "device %d: refusing %llu bytes: no device has that much memory",
			 idx, (unsigned long long)bytes);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	vgpu_register();
	if (vgpu_region_charge(idx, bytes, limit) == 0)
		return CUDA_SUCCESS;
	/* Stream-ordered pools may be holding freed memory: give it back first. */
	vgpu_pool_trim_device(idx);
	if (vgpu_region_charge(idx, bytes, limit) == 0)
		return CUDA_SUCCESS;
	VGPU_LOG(VGPU_LOG_INFO, "device %d: refusing %llu bytes, %llu of %llu in use", idx,
		 (unsigned long long)bytes, (unsigned long long)vgpu_region_used(idx),
		 (unsigned long long)limit);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void vgpu_uncharge(int idx, uint64_t bytes)
{
	if (bytes > INT64_MAX)
		bytes = INT64_MAX;
	vgpu_region_force(idx, -(int64_t)bytes);
}

static CUresult reserve_idx(int idx, uint64_t bytes, struct vgpu_resv *rv)
{
	CUresult res = vgpu_charge(idx, bytes);
	if (res == CUDA_SUCCESS)
		rv->idx = idx;
	return res;
}

CUresult vgpu_reserve_current(uint64_t bytes, struct vgpu_resv *rv)
{
	CUdevice dev;
	int idx;
	rv->idx = -1;
	rv->bytes = bytes;
	rv->ctx = NULL;
	/* No context: let the driver return its own error. */
	if (!vgpu_counting() || vgpu_current_dev(&dev, &idx) != 0)
		return CUDA_SUCCESS;
	if (REAL(cuCtxGetCurrent) != NULL)
		REAL(cuCtxGetCurrent)(&rv->ctx);
	return reserve_idx(idx, bytes, rv);
}

CUresult vgpu_reserve_dev(CUdevice dev, uint64_t bytes, struct vgpu_resv *rv)
{
	int idx = vgpu_dev_index(dev);
	rv->idx = -1;
	rv->bytes = bytes;
	rv->ctx = NULL;
	if (!vgpu_counting() || idx < 0)
		return CUDA_SUCCESS;
	return reserve_idx(idx, bytes, rv);
}

void vgpu_settle(const struct vgpu_resv *rv, CUresult res, int kind, uint64_t key)
{
	if (rv->idx < 0)
		return;
	if (res != CUDA_SUCCESS) {
		vgpu_uncharge(rv->idx, rv->bytes);
		return;
	}
	struct vgpu_entry e = {.key = key, .bytes = rv->bytes, .owner = rv->ctx,
			       .idx = rv->idx, .kind = (uint16_t)kind, .refs = 1};
	vgpu_ledger_add(&e);
}

bool vgpu_forget(int kind, uint64_t key, struct vgpu_entry *e)
{
	return vgpu_counting() && vgpu_ledger_take(kind, key, e);
}

void vgpu_finish_free(bool had, const struct vgpu_entry *e, CUresult res)
{
	if (!had)
		return;
	if (res == CUDA_SUCCESS && (e->flags & VGPU_F_EXPORTED) != 0)
		vgpu_share_linger(e);
	else if (res == CUDA_SUCCESS)
		vgpu_uncharge(e->idx, e->bytes);
	else
		vgpu_ledger_add(e);
}

VGPU_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuMemAlloc_v2);
	CUresult res = vgpu_reserve_current(bytesize, &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuMemAlloc_v2)(dptr, bytesize);
	/* The card is full, the container is not: host memory (host.c). */
	if (res == CUDA_ERROR_OUT_OF_MEMORY && rv.idx >= 0 && vgpu_cfg.oversubscribe && dptr != NULL &&
	    vgpu_host_fallback(&rv, dptr, bytesize) == CUDA_SUCCESS)
		return CUDA_SUCCESS;
	vgpu_settle(&rv, res, VGPU_K_DEVPTR, dptr ? *dptr : 0);
	return res;
}

VGPU_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuMemAlloc);
	CUresult res = vgpu_reserve_current(bytesize, &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuMemAlloc)(dptr, bytesize);
	vgpu_settle(&rv, res, VGPU_K_DEVPTR, dptr ? *dptr : 0);
	return res;
}

uint64_t vgpu_mul_sat(uint64_t a, uint64_t b)
{
	uint64_t r;
	return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

/* The driver picks the pitch; charge a 512-byte-aligned guess, then correct it. */
static uint64_t pitch_guess(uint64_t width, uint64_t height)
{
	uint64_t w = width > UINT64_MAX - 511 ? UINT64_MAX : (width + 511) & ~UINT64_C(511);
	return vgpu_mul_sat(w, height);
}

/*
 * Settles a pitched allocation: the driver's pitch may pad more than the
 * guess charged. The difference is charged like any allocation, and if it
 * does not fit the allocation is freed and refused: the limit holds whatever
 * the driver's alignment. Returns the result to give the caller.
 */
static CUresult pitch_settle(struct vgpu_resv *rv, CUresult res, uint64_t pitch, uint64_t height,
			     uint64_t key, CUresult (*release)(uint64_t))
{
	/* The pitch is the driver's answer only on success: read nothing else of a failure. */
	uint64_t real = res == CUDA_SUCCESS ? vgpu_mul_sat(pitch, height) : rv->bytes;
	if (rv->idx >= 0 && res == CUDA_SUCCESS && real != rv->bytes) {
		if (real < rv->bytes) {
			vgpu_uncharge(rv->idx, rv->bytes - real);
		} else if (vgpu_charge(rv->idx, real - rv->bytes) != CUDA_SUCCESS) {
			release(key);
			vgpu_uncharge(rv->idx, rv->bytes);
			VGPU_LOG(VGPU_LOG_INFO, "device %d: the driver's pitch %llu needs %llu bytes, over the limit",
				 rv->idx, (unsigned long long)pitch, (unsigned long long)real);
			return CUDA_ERROR_OUT_OF_MEMORY;
		}
		rv->bytes = real;
	}
	vgpu_settle(rv, res, VGPU_K_DEVPTR, key);
	return res;
}

static CUresult free_v2(uint64_t p) { return REAL(cuMemFree_v2)(p); }
static CUresult free_v1(uint64_t p) { return REAL(cuMemFree)((CUdeviceptr_v1)p); }

VGPU_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t widthInBytes,
					size_t height, unsigned int elementSizeBytes)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuMemAllocPitch_v2);
	CUresult res = vgpu_reserve_current(pitch_guess(widthInBytes, height), &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuMemAllocPitch_v2)(dptr, pPitch, widthInBytes, height, elementSizeBytes);
	/* The card is full, the container is not: host memory at a pitch of our choosing (host.c). */
	if (res == CUDA_ERROR_OUT_OF_MEMORY && rv.idx >= 0 && vgpu_cfg.oversubscribe && dptr != NULL &&
	    pPitch != NULL && vgpu_host_fallback_pitch(&rv, dptr, pPitch, widthInBytes, height) == CUDA_SUCCESS)
		return CUDA_SUCCESS;
	return pitch_settle(&rv, res, pPitch && res == CUDA_SUCCESS ? *pPitch : 0, height,
			    dptr && res == CUDA_SUCCESS ? *dptr : 0, free_v2);
}

VGPU_EXPORT CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
				     unsigned int widthInBytes, unsigned int height,
				     unsigned int elementSizeBytes)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuMemAllocPitch);
	CUresult res = vgpu_reserve_current(pitch_guess(widthInBytes, height), &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuMemAllocPitch)(dptr, pPitch, widthInBytes, height, elementSizeBytes);
	return pitch_settle(&rv, res, pPitch && res == CUDA_SUCCESS ? *pPitch : 0, height,
			    dptr && res == CUDA_SUCCESS ? *dptr : 0, free_v1);
}

VGPU_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	struct vgpu_resv rv;
	VGPU_ENTER_CUDA(cuMemAllocManaged);
	CUresult res = vgpu_reserve_current(bytesize, &rv);
	if (res != CUDA_SUCCESS)
		return res;
	res = REAL(cuMemAllocManaged)(dptr, bytesize, flags);
	vgpu_settle(&rv, res, VGPU_K_DEVPTR, dptr ? *dptr : 0);
	return res;
}

VGPU_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuMemFree_v2);
	bool had = vgpu_forget(VGPU_K_DEVPTR, dptr, &e);
	CUresult res;
	if (!had && (vgpu_host_free(dptr, &res) || vgpu_pool_free_plain(dptr, &res)))
		return res;
	res = REAL(cuMemFree_v2)(dptr);
	vgpu_finish_free(had, &e, res);
	return res;
}

VGPU_EXPORT CUresult cuMemFree(CUdeviceptr_v1 dptr)
{
	struct vgpu_entry e;
	VGPU_ENTER_CUDA(cuMemFree);
	bool had = vgpu_forget(VGPU_K_DEVPTR, dptr, &e);
	CUresult res = REAL(cuMemFree)(dptr);
	vgpu_finish_free(had, &e, res);
	return res;
}

/*
 * The total a container is shown for device idx (limit set) on a card of
 * card_total bytes: its share. Capped at the card, except under
 * CUDA_OVERSUBSCRIBE=true, where the share may pass the card
 * (deviceMemoryScaling > 1) and what the card lacks is host memory (host.c):
 * a total below the share would make frameworks that size themselves by it
 * (vLLM's gpu_memory_utilization, PyTorch's per-process memory fraction)
 * leave the rest of their share unused, and free could exceed total.
 */
uint64_t vgpu_shown_total(int idx, uint64_t card_total)
{
	uint64_t limit = vgpu_cfg.mem_limit[idx];
	return vgpu_cfg.oversubscribe || limit < card_total ? limit : card_total;
}

/*
 * Clamps a successful driver answer to the container's share of device idx:
 * free is the share minus what the container holds. Without
 * oversubscription it is also bounded by what the card has left (a
 * neighbour's memory is not to be had); with it, not: every byte of the share
 * can be had through cuMemAlloc_v2 (README, "What a container sees under
 * oversubscription").
 */
static void clamp_info(int idx, uint64_t *free_bytes, uint64_t *total_bytes)
{
	if (vgpu_cfg.mem_limit[idx] == 0)
		return;
	uint64_t limit = vgpu_shown_total(idx, *total_bytes);
	vgpu_pool_sync_device(idx);
	uint64_t used = vgpu_region_used(idx);
	uint64_t share = used >= limit ? 0 : limit - used;
	*free_bytes = vgpu_cfg.oversubscribe || share < *free_bytes ? share : *free_bytes;
	*total_bytes = limit;
}

VGPU_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total_bytes)
{
	CUdevice dev;
	int idx;
	VGPU_ENTER_CUDA(cuMemGetInfo_v2);
	CUresult res = REAL(cuMemGetInfo_v2)(free_bytes, total_bytes);
	if (res != CUDA_SUCCESS || !vgpu_cfg.any_mem_limit || free_bytes == NULL ||
	    total_bytes == NULL || vgpu_current_dev(&dev, &idx) != 0)
		return res;
	uint64_t f = *free_bytes, t = *total_bytes;
	clamp_info(idx, &f, &t);
	*free_bytes = f;
	*total_bytes = t;
	return res;
}

VGPU_EXPORT CUresult cuMemGetInfo(unsigned int *free_bytes, unsigned int *total_bytes)
{
	CUdevice dev;
	int idx;
	VGPU_ENTER_CUDA(cuMemGetInfo);
	CUresult res = REAL(cuMemGetInfo)(free_bytes, total_bytes);
	if (res != CUDA_SUCCESS || !vgpu_cfg.any_mem_limit || free_bytes == NULL ||
	    total_bytes == NULL || vgpu_current_dev(&dev, &idx) != 0)
		return res;
	uint64_t f = *free_bytes, t = *total_bytes;
	clamp_info(idx, &f, &t);
	*free_bytes = (unsigned int)(f > UINT_MAX ? UINT_MAX : f);
	*total_bytes = (unsigned int)(t > UINT_MAX ? UINT_MAX : t);
	return res;
}

VGPU_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuDeviceTotalMem_v2);
	CUresult res = REAL(cuDeviceTotalMem_v2)(bytes, dev);
	int idx = vgpu_dev_index(dev);
	if (res == CUDA_SUCCESS && bytes != NULL && idx >= 0 && vgpu_cfg.mem_limit[idx] != 0)
		*bytes = vgpu_shown_total(idx, *bytes);
	return res;
}

VGPU_EXPORT CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuDeviceTotalMem);
	CUresult res = REAL(cuDeviceTotalMem)(bytes, dev);
	int idx = vgpu_dev_index(dev);
	if (res == CUDA_SUCCESS && bytes != NULL && idx >= 0 && vgpu_cfg.mem_limit[idx] != 0) {
		uint64_t t = vgpu_shown_total(idx, *bytes);
		*bytes = (unsigned int)(t > UINT_MAX ? UINT_MAX : t);
	}
	return res;
}
