/* t_memory.c - memory limit: pass-through, limits, queries, allocation families. */
#include "test.h"

#include <pthread.h>
#include <string.h>
#include <unistd.h>

/* No limit and no region: everything reaches the driver untouched. */
static int passthrough(void)
{
	t_ctx(0);
	struct stub_stats *st = STUB(vgpuStubStats)();
	size_t f0, t0, f1, t1;
	CHECK_EQ(CU(cuMemGetInfo_v2)(&f0, &t0), CUDA_SUCCESS);
	CHECK_EQ(t0, 16 * GiB);
	CUdeviceptr p;
	uint64_t calls = st->alloc_calls;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 12 * GiB), CUDA_SUCCESS);
	CHECK_EQ(st->alloc_calls, calls + 1);
	CHECK_EQ(CU(cuMemGetInfo_v2)(&f1, &t1), CUDA_SUCCESS);
	CHECK_EQ(f0 - f1, 12 * GiB);
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	size_t total;
	CHECK_EQ(CU(cuDeviceTotalMem_v2)(&total, 0), CUDA_SUCCESS);
	CHECK_EQ(total, 16 * GiB);
	/* No region file appears when none is configured. */
	CHECK(getenv("CUDA_DEVICE_MEMORY_SHARED_CACHE") == NULL, "unexpected region env");
	return 0;
}

/* CUDA_DEVICE_MEMORY_LIMIT=1g: the OOM never reaches the driver. */
static int limit_basic(void)
{
	t_ctx(0);
	struct stub_stats *st = STUB(vgpuStubStats)();
	CUdeviceptr a, b;
	CHECK_EQ(CU(cuMemAlloc_v2)(&a, 600 * MiB), CUDA_SUCCESS);
	uint64_t calls = st->alloc_calls;
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 500 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(st->alloc_calls, calls);
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 500 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(b), CUDA_SUCCESS);
	/* Freeing an unknown pointer returns the driver's own error. */
	CHECK_EQ(CU(cuMemFree_v2)(0x1234), CUDA_ERROR_INVALID_VALUE);
	/* No context: the driver's error, not ours. */
	CHECK_EQ(CU(cuCtxSetCurrent)(NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, MiB), CUDA_ERROR_INVALID_CONTEXT);
	return 0;
}

/* CUDA_DEVICE_MEMORY_LIMIT=1g, _1=256m: per-device limits, dev 2 uses the global one. */
static int limit_per_device(void)
{
	static const uint64_t want[3] = {1 * GiB, 256 * MiB, 1 * GiB};
	for (int d = 0; d < 3; d++) {
		t_ctx(d);
		CUdeviceptr p, q;
		size_t total;
		CHECK_EQ(CU(cuDeviceTotalMem_v2)(&total, d), CUDA_SUCCESS);
		CHECK_EQ(total, want[d]);
		/* 64 MiB of the limit is the context itself. */
		CHECK_EQ(CU(cuMemAlloc_v2)(&p, want[d] - 96 * MiB), CUDA_SUCCESS);
		CHECK_EQ(CU(cuMemAlloc_v2)(&q, 64 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
		CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	}
	return 0;
}

/* CUDA_DEVICE_MEMORY_LIMIT=2000m with a region: queries report the share. */
static int clamped_queries(void)
{
	const uint64_t limit = 2000 * MiB, ctx = 64 * MiB;
	t_ctx(0);
	size_t f, t;
	CHECK_EQ(CU(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
	CHECK_EQ(t, limit);
	CHECK_EQ(f, limit - ctx);       /* the context overhead is counted */
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 500 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
	CHECK_EQ(f, limit - ctx - 500 * MiB);
	unsigned int f32, t32;
	CHECK_EQ(CU(cuMemGetInfo)(&f32, &t32), CUDA_SUCCESS);
	CHECK_EQ(t32, limit);
	CHECK_EQ(f32, limit - ctx - 500 * MiB);
	unsigned int tot32;
	size_t tot;
	CHECK_EQ(CU(cuDeviceTotalMem)(&tot32, 0), CUDA_SUCCESS);
	CHECK_EQ(tot32, limit);
	CHECK_EQ(CU(cuDeviceTotalMem_v2)(&tot, 0), CUDA_SUCCESS);
	CHECK_EQ(tot, limit);

	nvmlDevice_t dev;
	nvmlMemory_t m;
	nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
	CHECK_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
	CHECK_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(0, &dev), NVML_SUCCESS);
	CHECK_EQ(NV(nvmlDeviceGetMemoryInfo)(dev, &m), NVML_SUCCESS);
	CHECK_EQ(m.total, limit);
	CHECK_EQ(m.used, ctx + 500 * MiB);
	CHECK_EQ(m.free, limit - ctx - 500 * MiB);
	CHECK_EQ(NV(nvmlDeviceGetMemoryInfo_v2)(dev, &m2), NVML_SUCCESS);
	CHECK_EQ(m2.total, limit);
	CHECK_EQ(m2.used, ctx + 500 * MiB);
	CHECK_EQ(m2.free + m2.used, limit);
	/* Errors pass through unchanged. */
	nvmlMemory_v2_t bad = {.version = 1};
	CHECK_EQ(NV(nvmlDeviceGetMemoryInfo_v2)(dev, &bad), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
	/* A device without a limit (1) is reported as is. */
	CHECK_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(1, &dev), NVML_SUCCESS);
	CHECK_EQ(NV(nvmlDeviceGetMemoryInfo)(dev, &m), NVML_SUCCESS);
	CHECK_EQ(m.total, 16 * GiB);
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	return 0;
}

/* Each counted family charges exactly its size and its free gives it back. */
#define COUNTED(expr, bytes)                                                       \
	do {                                                                       \
		uint64_t before_ = t_mine(0);                                      \
		CHECK_EQ((expr), CUDA_SUCCESS);                                    \
		CHECK_EQ(t_mine(0) - before_, (bytes));                            \
	} while (0)

static int families(void)
{
	const uint64_t base0 = 0;
	CUcontext ctx = t_ctx(0);
	CHECK_EQ(t_mine(0), base0 + 64 * MiB);      /* primary context overhead */
	uint64_t base = t_mine(0);

	CUdeviceptr d2, dm, dp;
	CUdeviceptr_v1 d1, dp1;
	size_t pitch;
	unsigned int pitch1;
	COUNTED(CU(cuMemAlloc_v2)(&d2, 10 * MiB), 10 * MiB);
	COUNTED(CU(cuMemAlloc)(&d1, 3 * MiB), 3 * MiB);
	COUNTED(CU(cuMemAllocManaged)(&dm, 7 * MiB, 1), 7 * MiB);
	COUNTED(CU(cuMemAllocPitch_v2)(&dp, &pitch, 1000, 100, 4), 1024 * 100);
	COUNTED(CU(cuMemAllocPitch)(&dp1, &pitch1, 1030, 10, 4), 1536 * 10);

	CUarray a1, a2, a3, a4;
	CUmipmappedArray mip;
	CUDA_ARRAY_DESCRIPTOR ad = {1024, 512, CU_AD_FORMAT_FLOAT, 4};
	CUDA_ARRAY_DESCRIPTOR_v1 ad1 = {256, 256, CU_AD_FORMAT_UNSIGNED_INT8, 1};
	CUDA_ARRAY3D_DESCRIPTOR a3d = {128, 128, 8, CU_AD_FORMAT_HALF, 2, CUDA_ARRAY3D_LAYERED};
	CUDA_ARRAY3D_DESCRIPTOR_v1 a3d1 = {64, 64, 64, CU_AD_FORMAT_SIGNED_INT16, 1, 0};
	CUDA_ARRAY3D_DESCRIPTOR mipd = {256, 256, 0, CU_AD_FORMAT_FLOAT, 1, 0};
	COUNTED(CU(cuArrayCreate_v2)(&a1, &ad), 1024 * 512 * 16);
	COUNTED(CU(cuArrayCreate)(&a2, &ad1), 256 * 256);
	COUNTED(CU(cuArray3DCreate_v2)(&a3, &a3d), 128 * 128 * 8 * 4);
	COUNTED(CU(cuArray3DCreate)(&a4, &a3d1), 64 * 64 * 64 * 2);
	COUNTED(CU(cuMipmappedArrayCreate)(&mip, &mipd, 3),
		(256 * 256 + 128 * 128 + 64 * 64) * 4);
	CHECK_EQ(t_mine(0) - base, STUB(vgpuStubStats)()->held[0] - base);

	/* VMM: device memory counted, host memory not; retained handles stay counted. */
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
	CUmemAllocationProp host = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_HOST, 0}};
	CUmemGenericAllocationHandle h, hh, hr;
	COUNTED(CU(cuMemCreate)(&h, 32 * MiB, &prop, 0), 32 * MiB);
	COUNTED(CU(cuMemCreate)(&hh, 32 * MiB, &host, 0), 0);
	CUdeviceptr va;
	CHECK_EQ(STUB(cuMemAddressReserve)(&va, 32 * MiB, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(va, 32 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRetainAllocationHandle)(&hr, (void *)(uintptr_t)va), CUDA_SUCCESS);
	CHECK_EQ(hr, h);
	COUNTED(CU(cuMemRelease)(h), 0);                /* one reference left */
	COUNTED(CU(cuMemRelease)(hr), 0);               /* still mapped */
	uint64_t before = t_mine(0);
	CHECK_EQ(CU(cuMemUnmap)(va, 32 * MiB), CUDA_SUCCESS);
	CHECK_EQ(before - t_mine(0), 32 * MiB);
	CHECK_EQ(CU(cuMemRelease)(hh), CUDA_SUCCESS);

	/* Frees give everything back. */
	CHECK_EQ(CU(cuMemFree_v2)(d2), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree)(d1), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(dm), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(dp), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree)(dp1), CUDA_SUCCESS);
	CHECK_EQ(CU(cuArrayDestroy)(a1), CUDA_SUCCESS);
	CHECK_EQ(CU(cuArrayDestroy)(a2), CUDA_SUCCESS);
	CHECK_EQ(CU(cuArrayDestroy)(a3), CUDA_SUCCESS);
	CHECK_EQ(CU(cuArrayDestroy)(a4), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMipmappedArrayDestroy)(mip), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), base);

	/* A separate context: its overhead and its allocations go with it. */
	CUcontext c2;
	CUdeviceptr leak;
	COUNTED(CU(cuCtxCreate_v2)(&c2, 0, 0), 64 * MiB);
	COUNTED(CU(cuMemAlloc_v2)(&leak, 50 * MiB), 50 * MiB);
	CHECK_EQ(CU(cuCtxDestroy_v2)(c2), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), base);
	CHECK_EQ(CU(cuCtxSetCurrent)(ctx), CUDA_SUCCESS);
	return 0;
}

/*
 * VMM lifetime as the CUDA Driver API reference documents it: physical
 * memory lives until its last mapping and its last handle reference are gone,
 * whatever the order (limit 1g, context 64 MiB). The stub observer records
 * what the device really holds.
 */
static int vmm_lifetime(void)
{
	t_ctx(0);
	struct stub_stats *st = STUB(vgpuStubStats)();
	uint64_t base = t_mine(0);
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
	CUmemGenericAllocationHandle h, h2, hr;
	CUdeviceptr va, va2, p;
	/* Create, map, release: the programming guide's idiom. */
	CHECK_EQ(CU(cuMemCreate)(&h, 512 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuMemAddressReserve)(&va, 1024 * MiB, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(va, 512 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(h), CUDA_SUCCESS);
	CHECK_EQ(st->held[0], 64 * MiB + 512 * MiB);   /* the driver still holds it */
	CHECK_EQ(t_mine(0) - base, 512 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	/* A second mapping of the same memory (a reference taken back by address). */
	CHECK_EQ(CU(cuMemRetainAllocationHandle)(&hr, (void *)(uintptr_t)va), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(va + 512 * MiB, 512 * MiB, 0, hr, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(hr), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemUnmap)(va, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 512 * MiB);          /* mapped once more */
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuMemUnmap)(va + 512 * MiB, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), base);
	CHECK_EQ(st->held[0], 64 * MiB);
	/* Unmapping before releasing: the reference keeps it. One call unmaps two mappings. */
	CHECK_EQ(CU(cuMemCreate)(&h, 256 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemCreate)(&h2, 256 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuMemAddressReserve)(&va2, 512 * MiB, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(va2, 256 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(va2 + 256 * MiB, 256 * MiB, 0, h2, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemUnmap)(va2, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 512 * MiB);
	CHECK_EQ(CU(cuMemRelease)(h), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(h2), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), base);
	/* Errors change nothing: unknown ranges and handles. */
	CHECK_EQ(CU(cuMemUnmap)(va2, 512 * MiB), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(CU(cuMemRelease)(h), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(t_mine(0), base);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 900 * MiB), CUDA_SUCCESS);
	struct stub_observer *obs = STUB(vgpuStubObserver)();
	CHECK(obs == NULL || obs->violations == 0, "the device held more than the limit");
	return 0;
}

/* Stream-ordered allocations follow the pool's reserve; pressure trims pools. */
static int pools(void)
{
	t_ctx(0);   /* limit 1g, context 64 MiB */
	uint64_t base = t_mine(0);
	CUdeviceptr a, b, c;
	CHECK_EQ(CU(cuMemAllocAsync)(&a, 600 * MiB, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 600 * MiB);
	CHECK_EQ(CU(cuMemFreeAsync)(a, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 600 * MiB);      /* still reserved by the pool */
	/* Served from the reserve: allowed although 600 + 600 > 1g. */
	CHECK_EQ(CU(cuMemAllocAsync_ptsz)(&b, 600 * MiB, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFreeAsync_ptsz)(b, NULL), CUDA_SUCCESS);
	/* A plain allocation needs the cached reserve back: the pool is trimmed. */
	CHECK_EQ(CU(cuMemAlloc_v2)(&c, 800 * MiB), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 800 * MiB);
	CHECK_EQ(CU(cuMemAllocAsync)(&a, 300 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuMemFree_v2)(c), CUDA_SUCCESS);

	/* An explicit pool. */
	CUmemoryPool pool;
	char props[88] = {0};
	CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
	memcpy(props, &(int){CU_MEM_ALLOCATION_TYPE_PINNED}, sizeof(int));
	memcpy(props + 8, &loc, sizeof(loc));
	CHECK_EQ(STUB(cuMemPoolCreate)(&pool, props), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAllocFromPoolAsync)(&a, 100 * MiB, pool, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAllocFromPoolAsync_ptsz)(&b, 100 * MiB, pool, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 200 * MiB);
	CHECK_EQ(CU(cuMemFreeAsync)(a, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFreeAsync)(b, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemPoolDestroy)(pool), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), base);
	return 0;
}

/*
 * cuMemFree_v2 of stream-ordered memory, which the CUDA Driver API reference
 * allows (cuMemFree: no implicit synchronization for memory from
 * cuMemAllocAsync or cuMemAllocFromPoolAsync): the allocation leaves its pool
 * as with cuMemFreeAsync, and nothing of it may stay counted. Here a pool is
 * destroyed with one allocation freed that way and one outstanding: once
 * the outstanding one is freed, the pool is gone and so must its charge be.
 */
static int pool_plain_free(void)
{
	t_ctx(0);   /* limit 1g, context 64 MiB */
	uint64_t base = t_mine(0);
	CUdeviceptr a, b;
	void *fn = NULL;
	CHECK_EQ(CU(cuMemAllocAsync)(&a, 600 * MiB, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 600 * MiB);      /* the default pool keeps its reserve */
	CHECK_EQ(CU(cuMemAllocAsync)(&b, 600 * MiB, NULL), CUDA_SUCCESS);
	/* As a CUDA 12 runtime's cudaFree reaches it. */
	CHECK_EQ(CU(cuGetProcAddress)("cuMemFree", &fn, 12000, 0), CUDA_SUCCESS);
	CHECK(fn != NULL && ((__typeof__(&cuMemFree_v2))fn)(b) == CUDA_SUCCESS, "cuMemFree through cuGetProcAddress");
	CHECK_EQ(CU(cuMemAlloc_v2)(&a, 900 * MiB), CUDA_SUCCESS);  /* pressure trims the pool */
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), base);

	CUmemoryPool pool;
	char props[88] = {0};
	CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
	memcpy(props, &(int){CU_MEM_ALLOCATION_TYPE_PINNED}, sizeof(int));
	memcpy(props + 8, &loc, sizeof(loc));
	CHECK_EQ(STUB(cuMemPoolCreate)(&pool, props), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAllocFromPoolAsync)(&a, 100 * MiB, pool, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAllocFromPoolAsync)(&b, 100 * MiB, pool, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemPoolDestroy)(pool), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 100 * MiB);      /* b, until it is freed */
	CHECK_EQ(CU(cuMemFreeAsync)(b, NULL), CUDA_SUCCESS);
	CHECK(t_mine(0) == base, "%llu bytes still counted after the destroyed pool's last allocation was freed",
	      (unsigned long long)(t_mine(0) - base));
	CHECK_EQ(__atomic_load_n(&STUB(vgpuStubShared)()->dev[0].used, __ATOMIC_RELAXED), base);
	/* Freed once is freed: a second free is the driver's error, and changes nothing. */
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_ERROR_INVALID_VALUE);
	CHECK_EQ(t_mine(0), base);
	return t_failed;
}

/* Concurrent allocators never pass the limit; allocate/free are exact inverses. */
static void *stress_thread(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)pthread_self();
	CUdeviceptr held[64] = {0};
	CU(cuCtxSetCurrent)(*(CUcontext *)arg);
	for (int i = 0; i < 4000; i++) {
		int k = (int)(rand_r(&seed) % 64);
		if (held[k] != 0) {
			CHECK_EQ(CU(cuMemFree_v2)(held[k]), CUDA_SUCCESS);
			held[k] = 0;
		} else {
			CUresult r = CU(cuMemAlloc_v2)(&held[k], (1 + rand_r(&seed) % 8) * MiB);
			CHECK(r == CUDA_SUCCESS || r == CUDA_ERROR_OUT_OF_MEMORY, "rc %d", r);
			if (r != CUDA_SUCCESS)
				held[k] = 0;
		}
		CHECK(t_region()->hdr.mem_used[0] <= 256 * MiB, "over limit: %llu",
		      (unsigned long long)t_region()->hdr.mem_used[0]);
	}
	for (int k = 0; k < 64; k++)
		if (held[k] != 0)
			CU(cuMemFree_v2)(held[k]);
	return NULL;
}

static long rss_kib(void)
{
	long pages = 0, resident = 0;
	FILE *f = fopen("/proc/self/statm", "r");
	if (f != NULL) {
		if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
			resident = 0;
		fclose(f);
	}
	return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int stress(void)
{
	static CUcontext ctx;
	ctx = t_ctx(0);
	uint64_t base = t_mine(0);
	pthread_t th[4];
	for (int i = 0; i < 4; i++)
		pthread_create(&th[i], NULL, stress_thread, &ctx);
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	CHECK_EQ(t_mine(0), base);
	/* Many short-lived allocations must not grow the bookkeeping. */
	CUdeviceptr p;
	__typeof__(&cuMemAlloc_v2) alloc = CU(cuMemAlloc_v2);
	__typeof__(&cuMemFree_v2) release = CU(cuMemFree_v2);
	long before = rss_kib();
	for (int i = 0; i < 100000; i++)
		if (alloc(&p, 4096) != CUDA_SUCCESS || release(p) != CUDA_SUCCESS) {
			CHECK(0, "alloc/free %d failed", i);
			break;
		}
	CHECK(rss_kib() - before < 3072, "RSS grew by %ld KiB", rss_kib() - before);
	CHECK_EQ(t_mine(0), base);
	return 0;
}

/* CUDA_VISIBLE_DEVICES=1 with CUDA_DEVICE_MEMORY_LIMIT_1=128m: CUDA device 0 is limited. */
static int cvd_index(void)
{
	t_ctx(0);
	size_t total;
	CUdeviceptr p;
	CHECK_EQ(CU(cuDeviceTotalMem_v2)(&total, 0), CUDA_SUCCESS);
	CHECK_EQ(total, 128 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);   /* +64 MiB ctx */
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 60 * MiB), CUDA_SUCCESS);
	return 0;
}

/* CUDA_VISIBLE_DEVICES=<uuid of device 2>, CUDA_DEVICE_MEMORY_LIMIT_2=96m. */
static int cvd_uuid(void)
{
	t_ctx(0);
	size_t total;
	CHECK_EQ(CU(cuDeviceTotalMem_v2)(&total, 0), CUDA_SUCCESS);
	CHECK_EQ(total, 96 * MiB);
	return 0;
}

/* Without NVML the memory limit still works; context overhead is just not seen. */
static int no_nvml(void)
{
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 900 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 200 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	return 0;
}

const struct t_case t_memory_cases[] = {
	{"passthrough", passthrough},
	{"limit_basic", limit_basic},
	{"limit_per_device", limit_per_device},
	{"clamped_queries", clamped_queries},
	{"families", families},
	{"vmm_lifetime", vmm_lifetime},
	{"pools", pools},
	{"pool_plain_free", pool_plain_free},
	{"stress", stress},
	{"cvd_index", cvd_index},
	{"cvd_uuid", cvd_uuid},
	{"no_nvml", no_nvml},
	{NULL, NULL},
};
