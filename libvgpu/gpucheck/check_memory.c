/*
 * check_memory.c - the memory checks, each run in its own check process with
 * libvgpu preloaded and a limit L on the device under test:
 *
 *   memory_limit  the driver API reports L and refuses allocations past it
 *   nvml_memory   NVML reports L and what the process holds
 *   procaddr      entry points from cuGetProcAddress are limited too
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "gpu_check.h"

#define CHUNK (16 * GC_MIB)
/* The context's own memory is charged, so a fill may stop this far below L. */
#define CONTEXT_SLACK (256 * GC_MIB)
#define NVML_TOLERANCE (64 * GC_MIB)

struct fill {
	uint64_t bytes;
	unsigned int chunks;
	CUresult refusal;           /* CUDA_SUCCESS: never refused */
};

/* Allocates CHUNK after CHUNK until refused or `max` chunks are held. */
static void fill(const struct gc_api *api, CUdeviceptr *ptrs, unsigned int max, struct fill *f)
{
	*f = (struct fill){0, 0, CUDA_SUCCESS};
	while (f->chunks < max) {
		CUresult r = api->cuMemAlloc_v2(&ptrs[f->chunks], CHUNK);
		if (r != CUDA_SUCCESS) {
			f->refusal = r;
			return;
		}
		f->chunks++;
		f->bytes += CHUNK;
	}
}

/* The fill's verdict: at most L, at least L - CONTEXT_SLACK, then exactly OOM. */
static int judge_fill(const struct gc_api *api, const struct gc_target *t, const struct fill *f,
		      size_t total, size_t free_b)
{
	uint64_t low = t->limit > CONTEXT_SLACK ? t->limit - CONTEXT_SLACK : 0;
	if (f->refusal == CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "allocated %.1f MiB in 16 MiB chunks, past the %.1f MiB "
				  "limit, without a refusal", gc_mib(f->bytes), gc_mib(t->limit));
	if (f->refusal != CUDA_ERROR_OUT_OF_MEMORY || f->bytes > t->limit || f->bytes < low)
		return gc_verdict(GC_FAIL, "want %.1f..%.1f MiB then CUDA_ERROR_OUT_OF_MEMORY, "
				  "got %.1f MiB then %s", gc_mib(low), gc_mib(t->limit),
				  gc_mib(f->bytes), gc_cuerr(api, f->refusal));
	return gc_verdict(GC_PASS, "cuMemGetInfo_v2 total %.1f MiB, free %.1f MiB; %u x 16 MiB = "
			  "%.1f MiB allocated (want %.1f..%.1f), then %s", gc_mib(total),
			  gc_mib(free_b), f->chunks, gc_mib(f->bytes), gc_mib(low),
			  gc_mib(t->limit), gc_cuerr(api, f->refusal));
}

/*
 * cuMemGetInfo_v2 ("Memory Management": free and total memory of the current
 * context's device) must say L, and cuMemAlloc_v2 must refuse with
 * CUDA_ERROR_OUT_OF_MEMORY once the process holds about L.
 */
int gc_check_memory_limit(const struct gc_api *api, const struct gc_target *t)
{
	static const char *const need[] = {"cuMemGetInfo_v2", "cuMemAlloc_v2", "cuMemFree_v2",
					   NULL};
	CUdevice dev;
	size_t free_b = 0, total = 0;
	struct fill f;
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuMemGetInfo_v2(&free_b, &total);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemGetInfo_v2 returned %s", gc_cuerr(api, r));
	if (total != t->limit || free_b > t->limit)
		return gc_verdict(GC_FAIL, "cuMemGetInfo_v2: want total %.1f MiB and free <= it, "
				  "got total %.1f MiB, free %.1f MiB", gc_mib(t->limit),
				  gc_mib(total), gc_mib(free_b));
	unsigned int max = (unsigned int)(t->limit / CHUNK) + 2;
	CUdeviceptr *ptrs = calloc(max, sizeof(*ptrs));
	if (ptrs == NULL)
		return gc_verdict(GC_FAIL, "out of host memory");
	fill(api, ptrs, max, &f);
	for (unsigned int i = 0; i < f.chunks; i++)
		api->cuMemFree_v2(ptrs[i]);
	free(ptrs);
	return judge_fill(api, t, &f, total, free_b);
}

/* Compares one NVML answer with the limit and what the process holds; false if wrong. */
static bool nvml_right(const char *fn, uint64_t total, uint64_t used, uint64_t limit,
		       uint64_t held, char *why, size_t len)
{
	uint64_t diff = used > held ? used - held : held - used;
	if (total == limit && diff <= NVML_TOLERANCE)
		return true;
	snprintf(why, len, "%s: want total %.1f MiB and used %.1f +/- %.0f MiB, "
		 "got total %.1f MiB, used %.1f MiB", fn, gc_mib(limit), gc_mib(held),
		 gc_mib(NVML_TOLERANCE), gc_mib(total), gc_mib(used));
	return false;
}

/* nvmlDeviceGetMemoryInfo, and _v2 when NVML has it; false (why set) if either is wrong. */
static bool nvml_reports(const struct gc_api *api, nvmlDevice_t h, uint64_t limit,
			 uint64_t held, nvmlMemory_t *m, char *why, size_t len)
{
	nvmlReturn_t rc = api->nvmlDeviceGetMemoryInfo(h, m);
	if (rc != NVML_SUCCESS) {
		snprintf(why, len, "nvmlDeviceGetMemoryInfo returned %d", rc);
		return false;
	}
	if (!nvml_right("nvmlDeviceGetMemoryInfo", m->total, m->used, limit, held, why, len))
		return false;
	if (api->nvmlDeviceGetMemoryInfo_v2 == NULL)
		return true;
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
	rc = api->nvmlDeviceGetMemoryInfo_v2(h, &m2);
	if (rc != NVML_SUCCESS) {
		snprintf(why, len, "nvmlDeviceGetMemoryInfo_v2 returned %d", rc);
		return false;
	}
	return nvml_right("nvmlDeviceGetMemoryInfo_v2", m2.total, m2.used, limit, held, why, len);
}

/*
 * nvmlDeviceGetMemoryInfo ("Device Queries") on the device, found by UUID,
 * must report L as total and, as used, what this process holds: its context
 * (what cuMemGetInfo_v2 counted as used before any allocation) and 256 MiB.
 * nvmlDeviceGetMemoryInfo_v2 is held to the same when the driver has it.
 */
int gc_check_nvml_memory(const struct gc_api *api, const struct gc_target *t)
{
	static const char *const need[] = {"cuMemGetInfo_v2", "cuMemAlloc_v2",
					   "nvmlDeviceGetMemoryInfo", NULL};
	CUdevice dev;
	CUdeviceptr p;
	nvmlDevice_t h;
	nvmlMemory_t m;
	unsigned int index;
	size_t free_b = 0, total = 0;
	char why[512];
	if (api->nvml == NULL)
		return gc_verdict(GC_SKIP, "libnvidia-ml.so.1 cannot be opened");
	if (!api->nvml_ready)
		return gc_verdict(GC_FAIL, "nvmlInit_v2/nvmlInit returned %d with libvgpu "
				  "preloaded", api->nvml_init_rc);
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuMemGetInfo_v2(&free_b, &total);
	if (r == CUDA_SUCCESS)
		r = api->cuMemAlloc_v2(&p, GC_HELD);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "holding 256 MiB: %s", gc_cuerr(api, r));
	uint64_t context = total - free_b;
	if (gc_nvml_find(api, t->uuid, &h, &index) != 0)
		return gc_verdict(GC_FAIL, "NVML does not list %s", t->uuid);
	if (!nvml_reports(api, h, t->limit, context + GC_HELD, &m, why, sizeof(why)))
		return gc_verdict(GC_FAIL, "%s", why);
	return gc_verdict(GC_PASS, "nvmlDeviceGetMemoryInfo%s total %.1f MiB, used %.1f MiB; "
			  "the process holds 256 MiB + %.1f MiB context",
			  api->nvmlDeviceGetMemoryInfo_v2 != NULL ? " (and _v2)" : "",
			  gc_mib(m.total), gc_mib(m.used), gc_mib(context));
}

/*
 * cuGetProcAddress_v2 ("Driver Entry Point Access"), as cudart 12 calls it:
 * base name, CUDA version 12000, default flags; the answer is the newest
 * variant (cuMemAlloc_v2), which libvgpu must hand out hooked. Falls back to
 * cuGetProcAddress on drivers without _v2.
 */
static CUresult proc_address(const struct gc_api *api, const char *name, void **fn,
			     const char **how)
{
	CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SUCCESS;
	CUresult r;
	*fn = NULL;
	if (api->cuGetProcAddress_v2 != NULL) {
		*how = "cuGetProcAddress_v2";
		r = api->cuGetProcAddress_v2(name, fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, &status);
	} else {
		*how = "cuGetProcAddress";
		r = api->cuGetProcAddress(name, fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT);
	}
	if (r == CUDA_SUCCESS && (status != CU_GET_PROC_ADDRESS_SUCCESS || *fn == NULL))
		r = CUDA_ERROR_NOT_FOUND;
	return r;
}

int gc_check_procaddr(const struct gc_api *api, const struct gc_target *t)
{
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*release)(CUdeviceptr);
	const char *how;
	CUdevice dev;
	CUdeviceptr p = 0;
	if (api->cuGetProcAddress_v2 == NULL && api->cuGetProcAddress == NULL)
		return gc_verdict(GC_SKIP, "driver lacks cuGetProcAddress_v2 and cuGetProcAddress");
	if (!gc_prepare(api, NULL, &dev))
		return 0;
	CUresult r = proc_address(api, "cuMemAlloc", (void **)&alloc, &how);
	if (r == CUDA_SUCCESS)
		r = proc_address(api, "cuMemFree", (void **)&release, &how);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "%s(\"cuMemAlloc\"/\"cuMemFree\", 12000) returned %s",
				  how, gc_cuerr(api, r));
	r = alloc(&p, t->limit + CHUNK);
	if (r == CUDA_SUCCESS)
		release(p);
	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		return gc_verdict(GC_FAIL, "cuMemAlloc from %s: want CUDA_ERROR_OUT_OF_MEMORY for "
				  "L + 16 MiB = %.1f MiB, got %s", how, gc_mib(t->limit + CHUNK),
				  gc_cuerr(api, r));
	CUresult small = alloc(&p, CHUNK);
	CUresult freed = small == CUDA_SUCCESS ? release(p) : CUDA_SUCCESS;
	if (small != CUDA_SUCCESS || freed != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemAlloc/cuMemFree from %s: want CUDA_SUCCESS for "
				  "16 MiB, got %s / %s", how, gc_cuerr(api, small),
				  gc_cuerr(api, freed));
	return gc_verdict(GC_PASS, "cuMemAlloc from %s(12000): L + 16 MiB refused with %s, "
			  "16 MiB allocated and freed", how, gc_cuerr(api, r));
}
