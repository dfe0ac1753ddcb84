/*
 * check_vmm.c - vmm_lifetime: memory from the virtual memory management API
 * counts against the limit for as long as the driver keeps it, which is
 * until it is unmapped, not until its handle is released.
 *
 * The CUDA programming guide ("Virtual Memory Management") creates, maps and
 * then releases the handle at once; the Driver API reference of cuMemRelease
 * says the memory "will be freed when all outstanding mappings to the memory
 * are unmapped and when all outstanding references to the handle ... are
 * also released". An interposer that gives the memory back at cuMemRelease
 * lets a process hold more than its limit.
 *
 * Sizes: the mapping takes V = half of what is free after the context
 * (rounded up to the allocation granularity), the probe asks for the rest
 * plus 64 MiB. While mapped the probe passes the limit by 64 MiB and must be
 * refused; once unmapped it fits. With a negligible context that is the
 * L/2 mapping and L/2 + 64 MiB probe of the plan; deriving both from the
 * free memory keeps the second half of the check valid on GPUs whose context
 * takes hundreds of MiB.
 */
#define _GNU_SOURCE
#include <stdio.h>

#include "gpu_check.h"

#define OVER (64 * GC_MIB)

struct vmm {
	size_t size;
	CUmemGenericAllocationHandle handle;
	CUdeviceptr va;
	bool created, reserved, mapped;
};

/* The guide's sequence: create, reserve, map, set access, release. Returns the failing call. */
static const char *map_released(const struct gc_api *api, CUdevice dev, struct vmm *v, CUresult *r)
{
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
	gc_mem_access_desc access = {.location = {CU_MEM_LOCATION_TYPE_DEVICE, dev},
				     .flags = GC_MEM_ACCESS_FLAGS_PROT_READWRITE};
	if ((*r = api->cuMemCreate(&v->handle, v->size, &prop, 0)) != CUDA_SUCCESS)
		return "cuMemCreate";
	v->created = true;
	if ((*r = api->cuMemAddressReserve(&v->va, v->size, 0, 0, 0)) != CUDA_SUCCESS)
		return "cuMemAddressReserve";
	v->reserved = true;
	if ((*r = api->cuMemMap(v->va, v->size, 0, v->handle, 0)) != CUDA_SUCCESS)
		return "cuMemMap";
	v->mapped = true;
	if ((*r = api->cuMemSetAccess(v->va, v->size, &access, 1)) != CUDA_SUCCESS)
		return "cuMemSetAccess";
	if ((*r = api->cuMemRelease(v->handle)) != CUDA_SUCCESS)
		return "cuMemRelease";
	v->created = false;
	return NULL;
}

/* Undoes what map_released did; returns the first error (the check needs unmap to work). */
static CUresult unwind(const struct gc_api *api, struct vmm *v)
{
	CUresult r[3] = {CUDA_SUCCESS, CUDA_SUCCESS, CUDA_SUCCESS};
	if (v->mapped)
		r[0] = api->cuMemUnmap(v->va, v->size);
	if (v->reserved)
		r[1] = api->cuMemAddressFree(v->va, v->size);
	if (v->created)
		r[2] = api->cuMemRelease(v->handle);
	v->mapped = v->reserved = v->created = false;
	return r[0] != CUDA_SUCCESS ? r[0] : r[1] != CUDA_SUCCESS ? r[1] : r[2];
}

static CUresult try_alloc(const struct gc_api *api, size_t bytes)
{
	CUdeviceptr p;
	CUresult r = api->cuMemAlloc_v2(&p, bytes);
	if (r == CUDA_SUCCESS)
		api->cuMemFree_v2(p);
	return r;
}

/* V and the probe size from what the context left free; 0 if too little is free. */
static size_t plan(const struct gc_api *api, CUdevice dev, size_t free_b, size_t *gran,
		   size_t *probe)
{
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
	if (api->cuMemGetAllocationGranularity(gran, &prop, GC_MEM_ALLOC_GRANULARITY_MINIMUM) !=
		    CUDA_SUCCESS ||
	    *gran == 0)
		*gran = 2 * GC_MIB;
	size_t size = (free_b / 2 + *gran - 1) / *gran * *gran;
	if (size < OVER || size >= free_b)
		return 0;
	*probe = free_b - size + OVER;
	return size;
}

int gc_check_vmm_lifetime(const struct gc_api *api, const struct gc_target *t)
{
	static const char *const need[] = {
		"cuMemGetInfo_v2", "cuMemAlloc_v2", "cuMemFree_v2", "cuMemGetAllocationGranularity",
		"cuMemCreate", "cuMemRelease", "cuMemAddressReserve", "cuMemAddressFree",
		"cuMemMap", "cuMemUnmap", "cuMemSetAccess", NULL};
	struct vmm v = {0};
	CUdevice dev;
	size_t free_b = 0, total = 0, gran = 0, probe = 0;
	(void)t;
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuMemGetInfo_v2(&free_b, &total);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemGetInfo_v2 returned %s", gc_cuerr(api, r));
	if ((v.size = plan(api, dev, free_b, &gran, &probe)) == 0)
		return gc_verdict(GC_SKIP, "only %.1f MiB free after the context", gc_mib(free_b));
	const char *step = map_released(api, dev, &v, &r);
	if (step != NULL) {
		unwind(api, &v);
		return gc_verdict(GC_FAIL, "%s(%.1f MiB) returned %s", step, gc_mib(v.size),
				  gc_cuerr(api, r));
	}
	CUresult mapped = try_alloc(api, probe);
	CUresult unmapped = unwind(api, &v);
	if (unmapped != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemUnmap/cuMemAddressFree returned %s",
				  gc_cuerr(api, unmapped));
	unmapped = try_alloc(api, probe);
	if (mapped != CUDA_ERROR_OUT_OF_MEMORY || unmapped != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "%.1f MiB mapped and released, %.1f MiB free before: "
				  "cuMemAlloc_v2(%.1f MiB) want CUDA_ERROR_OUT_OF_MEMORY while "
				  "mapped, got %s; want CUDA_SUCCESS after unmap, got %s",
				  gc_mib(v.size), gc_mib(free_b), gc_mib(probe),
				  gc_cuerr(api, mapped), gc_cuerr(api, unmapped));
	return gc_verdict(GC_PASS, "%.1f MiB (granularity %.1f MiB) mapped and released: "
			  "cuMemAlloc_v2(%.1f MiB) %s while mapped, %s after cuMemUnmap + "
			  "cuMemAddressFree", gc_mib(v.size), gc_mib(gran), gc_mib(probe),
			  gc_cuerr(api, mapped), gc_cuerr(api, unmapped));
}
