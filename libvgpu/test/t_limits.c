/*
 * t_limits.c - every path that adds device memory checks the limit: sizes no
 * device can have, the driver's pitch padding, a pool growing in bigger steps
 * than libvgpu charged, and context creation overhead.
 */
#include "test.h"

#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <unistd.h>

/* The region's counter for device idx, valid (check word) and below 2^48. */
static int sane_total(int idx)
{
	struct vgpu_region *r = t_region();
	if (r == NULL)
		return 0;
	uint64_t v = r->hdr.mem_used[idx];
	return (v ^ r->hdr.mem_used_check[idx]) == VGPU_CHECK_KEY && v < (UINT64_C(1) << 48);
}

/* Child of huge_sizes: device 0 limited (1g), device 1 counted without a limit. */
static int child_huge_sizes(void)
{
	static const uint64_t huge[] = {UINT64_C(1) << 60, UINT64_MAX, (UINT64_C(1) << 48) + 1};
	for (int dev = 0; dev < 2; dev++) {
		t_ctx(dev);
		uint64_t before = t_mine(dev);
		for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
			CUdeviceptr p;
			size_t pitch;
			CUmemGenericAllocationHandle h;
			CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
						    .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
			CHECK_EQ(CU(cuMemAlloc_v2)(&p, huge[i]), CUDA_ERROR_OUT_OF_MEMORY);
			CHECK_EQ(CU(cuMemAllocManaged)(&p, huge[i], 1), CUDA_ERROR_OUT_OF_MEMORY);
			CHECK_EQ(CU(cuMemAllocAsync)(&p, huge[i], NULL), CUDA_ERROR_OUT_OF_MEMORY);
			CHECK_EQ(CU(cuMemCreate)(&h, huge[i], &prop, 0), CUDA_ERROR_OUT_OF_MEMORY);
			CHECK_EQ(CU(cuMemAllocPitch_v2)(&p, &pitch, huge[i], 3, 4), CUDA_ERROR_OUT_OF_MEMORY);
			CHECK(sane_total(dev), "device %d: total %llu after a request of %llu", dev,
			      (unsigned long long)t_region()->hdr.mem_used[dev], (unsigned long long)huge[i]);
		}
		/* Descriptors whose size overflows 64 bits are refused, not charged wrapped. */
		CUarray a;
		CUDA_ARRAY3D_DESCRIPTOR d = {UINT64_C(1) << 40, UINT64_C(1) << 40, UINT64_C(1) << 20,
					     CU_AD_FORMAT_FLOAT, 4, 0};
		CHECK_EQ(CU(cuArray3DCreate_v2)(&a, &d), CUDA_ERROR_OUT_OF_MEMORY);
		CHECK_EQ(t_mine(dev), before);
		CHECK(sane_total(dev), "device %d: total damaged", dev);
		/* Ordinary allocations are unaffected. */
		CUdeviceptr q;
		CHECK_EQ(CU(cuMemAlloc_v2)(&q, 100 * MiB), CUDA_SUCCESS);
		CHECK_EQ(t_mine(dev) - before, 100 * MiB);
		CHECK_EQ(CU(cuMemFree_v2)(q), CUDA_SUCCESS);
	}
	return 0;
}

/*
 * Sizes no device has are refused with or without a limit, and never reach
 * the region's totals: nothing in the region looks damaged, nothing is
 * repaired, nothing is logged above info.
 */
static int huge_sizes(void)
{
	static const char *const env[] = {"CUDA_DEVICE_MEMORY_LIMIT_0=1g", NULL};
	int rc;
	const char *err = t_child_stderr("child_huge_sizes", env, &rc);
	CHECK_EQ(rc, 0);
	CHECK(strstr(err, "W:") == NULL && strstr(err, "E:") == NULL,
	      "no warning or error expected; stderr:\n%s", err);
	return 0;
}

/*
 * VGPU_STUB_PITCH_ALIGN=4096: the driver pads rows more than libvgpu's
 * 512-byte guess charged. The difference is charged too; an allocation it
 * does not fit is freed and refused (limit 1g, context 64 MiB).
 */
static int pitch_padding(void)
{
	t_ctx(0);
	struct stub_stats *st = STUB(vgpuStubStats)();
	uint64_t base = t_mine(0);
	CUdeviceptr p;
	size_t pitch;
	/* 1000-byte rows: 4096 each on this driver. 100k rows: 390.6 MiB, fits. */
	CHECK_EQ(CU(cuMemAllocPitch_v2)(&p, &pitch, 1000, 100000, 4), CUDA_SUCCESS);
	CHECK_EQ(pitch, 4096);
	CHECK_EQ(t_mine(0) - base, 4096 * 100000);
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), base);
	/* 300k rows: the guess (293 MiB) fits, the real 1.14 GiB does not. */
	CHECK_EQ(CU(cuMemAllocPitch_v2)(&p, &pitch, 1000, 300000, 4), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(t_mine(0), base);
	CHECK_EQ(st->held[0], 64 * MiB);    /* the driver's allocation was freed */
	CUdeviceptr_v1 p1;
	unsigned int pitch1;
	CHECK_EQ(CU(cuMemAllocPitch)(&p1, &pitch1, 1000, 300000, 4), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(t_mine(0), base);
	CHECK_EQ(st->held[0], 64 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 900 * MiB), CUDA_SUCCESS);
	return 0;
}

/*
 * A pool's growth is charged in whole granules (2 MiB) before the driver is
 * asked, so the device never holds more than the limit (stub observer).
 * Limit 1001m, context 64 MiB: 937 MiB left, an odd number of MiB.
 */
static int pool_granules(void)
{
	t_ctx(0);
	uint64_t base = t_mine(0);
	CUdeviceptr p;
	/* 936.5 MiB would make the pool reserve 938 MiB. */
	CHECK_EQ(CU(cuMemAllocAsync)(&p, 936 * MiB + 512 * 1024, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(t_mine(0), base);
	CHECK_EQ(CU(cuMemAllocAsync)(&p, 935 * MiB, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 936 * MiB);
	CHECK_EQ(CU(cuMemFreeAsync)(p, NULL), CUDA_SUCCESS);
	struct stub_observer *obs = STUB(vgpuStubObserver)();
	CHECK(obs != NULL && obs->violations == 0, "the device held more than the limit: max %llu",
	      obs ? (unsigned long long)obs->hwm[0] : 0ull);
	return 0;
}

/*
 * VGPU_STUB_POOL_STEP=32m: a driver that grows pools in 32 MiB chunks. The
 * growth beyond what libvgpu charged is checked after the call; an
 * allocation whose pool growth does not fit is undone and refused, and the
 * books come back under the limit once the stream reaches the free.
 * Limit 1000m, context 64 MiB: 936 MiB left.
 */
static int pool_step(void)
{
	t_ctx(0);
	uint64_t base = t_mine(0);
	const uint64_t limit = 1000 * MiB;
	CUdeviceptr p;
	/* 930 MiB: the pool would reserve 960 MiB. */
	CHECK_EQ(CU(cuMemAllocAsync)(&p, 930 * MiB, NULL), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(STUB(cuStreamSynchronize)(NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, MiB), CUDA_SUCCESS);   /* pressure trims the pool */
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	CHECK(t_region()->hdr.mem_used[0] <= limit, "books over the limit: %llu",
	      (unsigned long long)t_region()->hdr.mem_used[0]);
	CHECK(STUB(vgpuStubStats)()->held[0] <= limit, "device over the limit: %llu",
	      (unsigned long long)STUB(vgpuStubStats)()->held[0]);
	/* 900 MiB: 928 reserved, fits. */
	CHECK_EQ(CU(cuMemAllocAsync)(&p, 900 * MiB, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0) - base, 928 * MiB);
	CHECK_EQ(CU(cuMemFreeAsync)(p, NULL), CUDA_SUCCESS);
	return 0;
}

/*
 * Context overhead is charged like an allocation (VGPU_STUB_CTX_MEM is
 * 64 MiB): under a 32m limit no context fits and creating one fails with
 * CUDA_ERROR_OUT_OF_MEMORY, as the driver answers when a device has no room;
 * the device keeps nothing.
 */
static int ctx_over_limit(void)
{
	struct stub_stats *st = STUB(vgpuStubStats)();
	CUcontext c;
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuDevicePrimaryCtxRetain)(&c, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(st->held[0], 0);
	CHECK_EQ(CU(cuCtxCreate_v2)(&c, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(st->held[0], 0);
	CHECK_EQ(t_mine(0), 0);
	/* Device 1 has no limit here (CUDA_DEVICE_MEMORY_LIMIT_0 only). */
	CHECK_EQ(CU(cuDevicePrimaryCtxRetain)(&c, 1), CUDA_SUCCESS);
	return 0;
}

/* A device at its limit: a new context is created, found over, destroyed (limit 100m). */
static int ctx_at_limit(void)
{
	struct stub_stats *st = STUB(vgpuStubStats)();
	t_ctx(0);
	CUdeviceptr p;
	CUcontext c;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 36 * MiB), CUDA_SUCCESS);
	uint64_t held = st->held[0];
	CHECK_EQ(CU(cuCtxCreate_v2)(&c, 0, 0), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(st->held[0], held);
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	return 0;
}


/* Child: another container (its own region) holding 700 MiB of the card, until killed. */
static int child_oversub_neighbour(void)
{
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 700 * MiB), CUDA_SUCCESS);
	t_ready();
	pause();
	return 0;
}

/*
 * A 1 GiB card shared out as two 768m limits (deviceMemoryScaling 1.5). The
 * neighbour holds 700 MiB, so the card is full while this container has used
 * little of its share. With CUDA_OVERSUBSCRIBE=true what the card cannot
 * hold is served from host memory, within the limit, counted and published
 * as such; without it the card's out-of-memory stands (OVERSUB_EXPECT=off).
 */
static int oversubscribe(void)
{
	const char *expect = getenv("OVERSUB_EXPECT");
	bool on = expect == NULL || strcmp(expect, "off") != 0;
	char other[512];
	snprintf(other, sizeof(other), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/other.cache", t_dir());
	const char *env[] = {other, NULL};
	int nb = t_spawn_ready("child_oversub_neighbour", env);
	CHECK(nb > 0, "neighbour did not start");
	t_ctx(0);
	struct stub_stats *st = STUB(vgpuStubStats)();
	CUdeviceptr big, small, more;
	size_t f, t;
	CHECK_EQ(CU(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
	CHECK_EQ(t, 768 * MiB);
	/* 196 MiB left on the card, 704 MiB left of the share. */
	CUresult r = CU(cuMemAlloc_v2)(&big, 600 * MiB);
	if (!on) {
		CHECK_EQ(r, CUDA_ERROR_OUT_OF_MEMORY);
		CHECK_EQ(t_mine(0), 64 * MiB);
	} else {
		CHECK_EQ(r, CUDA_SUCCESS);
		CHECK_EQ(st->host_bytes, 600 * MiB);
		CHECK_EQ(st->held[0], 64 * MiB);        /* nothing more on the card */
		CHECK_EQ(t_mine(0), 664 * MiB);
		CHECK_EQ(t_region()->hdr.host_mib[0], 600);
		CHECK_EQ(CU(cuMemAlloc_v2)(&small, 150 * MiB), CUDA_ERROR_OUT_OF_MEMORY); /* the limit */
		CHECK_EQ(CU(cuMemAlloc_v2)(&more, 100 * MiB), CUDA_SUCCESS);            /* on the card */
		CHECK_EQ(st->held[0], 164 * MiB);
		CHECK_EQ(CU(cuMemFree_v2)(big), CUDA_SUCCESS);
		CHECK_EQ(st->host_bytes, 0);
		CHECK_EQ(t_region()->hdr.host_mib[0], 0);
		CHECK_EQ(t_mine(0), 164 * MiB);
		CHECK_EQ(CU(cuMemFree_v2)(more), CUDA_SUCCESS);
	}
	kill(nb, SIGKILL);
	t_wait(nb);
	return 0;
}

const struct t_case t_limit_cases[] = {
	{"huge_sizes", huge_sizes},
	{"child_huge_sizes", child_huge_sizes},
	{"pitch_padding", pitch_padding},
	{"pool_granules", pool_granules},
	{"pool_step", pool_step},
	{"ctx_over_limit", ctx_over_limit},
	{"ctx_at_limit", ctx_at_limit},
	{"oversubscribe", oversubscribe},
	{"child_oversub_neighbour", child_oversub_neighbour},
	{NULL, NULL},
};
