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
#define HELD (256 * GC_MIB)
#define NVML_TOLERANCE (64 * GC_MIB)

static double mib(uint64_t bytes) { return (double)bytes / (double)GC_MIB; }

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

/*
 * cuMemGetInfo_v2 ("Memory Management": free and total memory of the current
 * context's device) must say L, and cuMemAlloc_v2 must refuse with
 * CUDA_ERROR_OUT_OF_MEMORY once the process holds about L.
 */
int gc_check_memory_limit(const struct gc_api *api, const struct gc_target *t)
{
	static const char *const need[] = {"cuMemGetInfo_v2", "cuMemAlloc_v2", "cuMemFree_v2", NULL};
	CUdevice dev;
	size_t free_b = 0, total = 0;
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuMemGetInfo_v2(&free_b, &total);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemGetInfo_v2 returned %s", gc_cuerr(api, r));
	if (total != t->limit || free_b > t->limit)
		return gc_verdict(GC_FAIL, "cuMemGetInfo_v2: want total %.1f MiB and free <= it, got total %.1f MiB, free %.1f MiB",
				  mib(t->limit), mib(total), mib(free_b));
	unsigned int max = (unsigned int)(t->limit / CHUNK) + 2;
	CUdeviceptr *ptrs = calloc(max, sizeof(*ptrs));
	struct fill f;
	if (ptrs == NULL)
		return gc_verdict(GC_FAIL, "out of host memory");
	fill(api, ptrs, max, &f);
	for (unsigned int i = 0; i < f.chunks; i++)
		api->cuMemFree_v2(ptrs[i]);
	free(ptrs);
	uint64_t low = t->limit > CONTEXT_SLACK ? t->limit - CONTEXT_SLACK : 0;
	if (f.refusal == CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "allocated %.1f MiB of 16 MiB chunks past the %.1f MiB limit without a refusal",
				  mib(f.bytes), mib(t->limit));
	if (f.refusal != CUDA_ERROR_OUT_OF_MEMORY || f.bytes > t->limit || f.bytes < low)
		return gc_verdict(GC_FAIL, "want %.1f..%.1f MiB then CUDA_ERROR_OUT_OF_MEMORY, got %.1f MiB then %s",
				  mib(low), mib(t->limit), mib(f.bytes), gc_cuerr(api, f.refusal));
	return gc_verdict(GC_PASS, "cuMemGetInfo_v2 total %.1f MiB free %.1f MiB; %u x 16 MiB = %.1f MiB allocated (want %.1f..%.1f), then %s",
			  mib(total), mib(free_b), f.chunks, mib(f.bytes), mib(low), mib(t->limit),
			  gc_cuerr(api, f.refusal));
}

/* Compares one NVML answer with the limit and what the process holds; NULL if right. */
static const char *judge_nvml(const char *fn, uint64_t total, uint64_t used, uint64_t limit,
			      uint64_t held, char *buf, size_t len)
{
	uint64_t diff = used > held ? used - held : held - used;
	if (total == limit && diff <= NVML_TOLERANCE)
		return NULL;
	snprintf(buf, len, "%s: want total %.1f MiB and used %.1f +/- %.0f MiB, got total %.1f MiB, used %.1f MiB",
		 fn, mib(limit), mib(held), mib(NVML_TOLERANCE), mib(total), mib(used));
	return buf;
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
	unsigned int index;
	size_t free_b = 0, total = 0;
	char why[512];
	if (api->nvml == NULL)
		return gc_verdict(GC_SKIP, "libnvidia-ml.so.1 cannot be opened");
	if (!api->nvml_ready)
		return gc_verdict(GC_FAIL, "nvmlInit_v2/nvmlInit returned %d with libvgpu preloaded",
				  api->nvml_init_rc);
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuMemGetInfo_v2(&free_b, &total);
	if (r == CUDA_SUCCESS)
		r = api->cuMemAlloc_v2(&p, HELD);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "holding 256 MiB: %s", gc_cuerr(api, r));
	uint64_t held = total - free_b + HELD;
	if (gc_nvml_find(api, t->uuid, &h, &index) != 0)
		return gc_verdict(GC_FAIL, "NVML does not list %s", t->uuid);
	nvmlMemory_t m;
	nvmlReturn_t rc = api->nvmlDeviceGetMemoryInfo(h, &m);
	if (rc != NVML_SUCCESS)
		return gc_verdict(GC_FAIL, "nvmlDeviceGetMemoryInfo returned %d", rc);
	if (judge_nvml("nvmlDeviceGetMemoryInfo", m.total, m.used, t->limit, held, why, sizeof(why)))
		return gc_verdict(GC_FAIL, "%s", why);
	const char *v2 = "";
	if (api->nvmlDeviceGetMemoryInfo_v2 != NULL) {
		nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
		rc = api->nvmlDeviceGetMemoryInfo_v2(h, &m2);
		if (rc != NVML_SUCCESS)
			return gc_verdict(GC_FAIL, "nvmlDeviceGetMemoryInfo_v2 returned %d", rc);
		if (judge_nvml("nvmlDeviceGetMemoryInfo_v2", m2.total, m2.used, t->limit, held, why,
			       sizeof(why)))
			return gc_verdict(GC_FAIL, "%s", why);
		v2 = " (and _v2)";
	}
	return gc_verdict(GC_PASS, "nvmlDeviceGetMemoryInfo%s total %.1f MiB, used %.1f MiB; the process holds 256 MiB + %.1f MiB context",
			  v2, mib(m.total), mib(m.used), mib(held - HELD));
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
		return gc_verdict(GC_FAIL, "%s(\"cuMemAlloc\"/\"cuMemFree\", 12000) returned %s", how,
				  gc_cuerr(api, r));
	r = alloc(&p, t->limit + CHUNK);
	if (r == CUDA_SUCCESS)
		release(p);
	if (r != CUDA_ERROR_OUT_OF_MEMORY)
		return gc_verdict(GC_FAIL, "cuMemAlloc from %s: want CUDA_ERROR_OUT_OF_MEMORY for L + 16 MiB = %.1f MiB, got %s",
				  how, mib(t->limit + CHUNK), gc_cuerr(api, r));
	CUresult small = alloc(&p, CHUNK);
	CUresult freed = small == CUDA_SUCCESS ? release(p) : CUDA_SUCCESS;
	if (small != CUDA_SUCCESS || freed != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemAlloc/cuMemFree from %s: want CUDA_SUCCESS for 16 MiB, got %s / %s",
				  how, gc_cuerr(api, small), gc_cuerr(api, freed));
	return gc_verdict(GC_PASS, "cuMemAlloc from %s(12000): L + 16 MiB refused with %s, 16 MiB allocated and freed",
			  how, gc_cuerr(api, r));
}
