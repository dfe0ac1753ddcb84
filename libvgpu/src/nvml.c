/*
 * nvml.c - NVML memory queries report the container's share, so nvidia-smi
 * and monitoring inside the container show the limit as the total and the
 * container's usage (all its processes) as used.
 *
 * NVML indices are container device indices already (NVML ignores
 * CUDA_VISIBLE_DEVICES), so no remapping is needed here.
 */
#define _GNU_SOURCE
#include "hooks.h"

/* Returns the limit for the device, 0 when its figures are left untouched. */
static uint64_t share_of(nvmlDevice_t device, int *idx_out)
{
	unsigned int idx;
	if (!vgpu_cfg.any_mem_limit || REAL(nvmlDeviceGetIndex) == NULL ||
	    REAL(nvmlDeviceGetIndex)(device, &idx) != NVML_SUCCESS || idx >= VGPU_MAX_DEVICES)
		return 0;
	*idx_out = (int)idx;
	return vgpu_cfg.mem_limit[idx];
}

static void clamp(uint64_t limit, int idx, unsigned long long *total, unsigned long long *free_b,
		  unsigned long long *used)
{
	if (limit > *total)
		limit = *total;
	uint64_t u = vgpu_region_used(idx);
	if (u > limit)
		u = limit;
	*total = limit;
	*used = u;
	*free_b = limit - u;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory)
{
	int idx = -1;
	VGPU_ENTER_NVML(nvmlDeviceGetMemoryInfo);
	nvmlReturn_t rc = REAL(nvmlDeviceGetMemoryInfo)(device, memory);
	uint64_t limit;
	if (rc == NVML_SUCCESS && memory != NULL && (limit = share_of(device, &idx)) != 0)
		clamp(limit, idx, &memory->total, &memory->free, &memory->used);
	return rc;
}

VGPU_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory)
{
	int idx = -1;
	VGPU_ENTER_NVML(nvmlDeviceGetMemoryInfo_v2);
	nvmlReturn_t rc = REAL(nvmlDeviceGetMemoryInfo_v2)(device, memory);
	uint64_t limit;
	if (rc == NVML_SUCCESS && memory != NULL && (limit = share_of(device, &idx)) != 0) {
		/* The driver's reservation is not part of the container's share. */
		memory->reserved = 0;
		clamp(limit, idx, &memory->total, &memory->free, &memory->used);
	}
	return rc;
}
