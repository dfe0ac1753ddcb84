/*
 * t_oversub.c - memory over-commit (CUDA_OVERSUBSCRIBE=true), family by
 * family: when the card is full and the container is not, each allocation
 * family either falls back to host memory mapped into the device or keeps
 * the card's CUDA_ERROR_OUT_OF_MEMORY, as src/host.c decides and documents.
 *
 * The scene (run.sh): a 1 GiB card shared out as 768m limits
 * (deviceMemoryScaling 1.5). A neighbour container (its own region) holds
 * 700 MiB and its 64 MiB context; this container's context takes 64 MiB: the
 * card has 196 MiB left, the container 704 MiB of its share. Every request
 * is 300 MiB: past the card, within the share. The verdict comes from the
 * stub driver (what the card holds, what host memory is pinned), the books
 * only as the limit's side.
 */
#include "test.h"

#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define ASK (300 * MiB)

struct scene {
	int neighbour;
	struct stub_stats *st;
	uint64_t card, mine;    /* the card's bytes held by this process, its books, before */
};

static int scene_start(struct scene *s)
{
	char other[512];
	snprintf(other, sizeof(other), "CUDA_DEVICE_MEMORY_SHARED_CACHE=%s/other.cache", t_dir());
	const char *env[] = {other, NULL};
	s->neighbour = t_spawn_ready("child_oversub_neighbour", env);
	CHECK(s->neighbour > 0, "neighbour did not start");
	if (s->neighbour <= 0)
		return -1;
	t_ctx(0);
	s->st = STUB(vgpuStubStats)();
	s->card = s->st->held[0];
	s->mine = t_mine(0);
	CHECK_EQ(s->card, 64 * MiB);
	CHECK_EQ(s->mine, 64 * MiB);
	return 0;
}

static void scene_end(struct scene *s)
{
	kill(s->neighbour, SIGKILL);
	t_wait(s->neighbour);
}

/* Nothing of a refused request stayed: not on the card, not in host memory, not in the books. */
static void nothing_kept(const struct scene *s, const char *family)
{
	CHECK(s->st->held[0] == s->card, "%s: the card holds %llu, want %llu", family,
	      (unsigned long long)s->st->held[0], (unsigned long long)s->card);
	CHECK(s->st->host_bytes == 0, "%s: %llu bytes of host memory pinned", family,
	      (unsigned long long)s->st->host_bytes);
	CHECK(t_mine(0) == s->mine, "%s: books %llu, want %llu", family, (unsigned long long)t_mine(0),
	      (unsigned long long)s->mine);
	CHECK_EQ(t_region()->hdr.host_mib[0], 0);
}

/*
 * The refusal is the card's, not the limit's: the same bytes as plain
 * linear memory (cuMemAlloc_v2) are served from host memory, within the share.
 */
static void share_had_room(const struct scene *s)
{
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, ASK), CUDA_SUCCESS);
	CHECK_EQ(s->st->host_bytes, ASK);
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	CHECK_EQ(s->st->host_bytes, 0);
}

/* A family that keeps the card's out-of-memory: what it returned. */
static CUresult refused_family(const char *family, struct scene *s)
{
	CUdeviceptr p;
	if (strcmp(family, "alloc_v1") == 0) {
		CUdeviceptr_v1 p1;
		return CU(cuMemAlloc)(&p1, (unsigned int)ASK);
	}
	if (strcmp(family, "pitch_v1") == 0) {
		CUdeviceptr_v1 p1;
		unsigned int pitch;
		return CU(cuMemAllocPitch)(&p1, &pitch, 1024, (unsigned int)(ASK / 1024), 4);
	}
	if (strcmp(family, "managed") == 0)
		return CU(cuMemAllocManaged)(&p, ASK, 1);
	if (strcmp(family, "async") == 0)
		return CU(cuMemAllocAsync)(&p, ASK, NULL);
	if (strcmp(family, "pool") == 0) {
		CUmemoryPool pool;
		CHECK_EQ(CU(cuDeviceGetMemPool)(&pool, 0), CUDA_SUCCESS);
		return CU(cuMemAllocFromPoolAsync)(&p, ASK, pool, NULL);
	}
	if (strcmp(family, "vmm") == 0) {
		CUmemGenericAllocationHandle h;
		CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
					    .location = {CU_MEM_LOCATION_TYPE_DEVICE, 0}};
		return CU(cuMemCreate)(&h, ASK, &prop, 0);
	}
	/* 8192 x 2400 texels of 4 floats, 4096 x 1200 x 4 in 3D: 300 MiB each. */
	if (strcmp(family, "array") == 0) {
		CUarray a;
		CUDA_ARRAY_DESCRIPTOR d = {8192, 2400, CU_AD_FORMAT_FLOAT, 4};
		return CU(cuArrayCreate_v2)(&a, &d);
	}
	if (strcmp(family, "array3d") == 0) {
		CUarray a;
		CUDA_ARRAY3D_DESCRIPTOR d = {4096, 1200, 4, CU_AD_FORMAT_FLOAT, 4, 0};
		return CU(cuArray3DCreate_v2)(&a, &d);
	}
	if (strcmp(family, "mipmap") == 0) {
		CUmipmappedArray m;
		CUDA_ARRAY3D_DESCRIPTOR d = {8192, 2400, 0, CU_AD_FORMAT_FLOAT, 4, 0};
		return CU(cuMipmappedArrayCreate)(&m, &d, 1);
	}
	if (strcmp(family, "context") == 0) {
		/* Fill the card first: a context takes 64 MiB, less than the card has left. */
		CUdeviceptr fill;
		CUcontext c;
		CHECK_EQ(CU(cuMemAlloc_v2)(&fill, 196 * MiB), CUDA_SUCCESS);
		CHECK_EQ(s->st->host_bytes, 0);    /* on the card */
		CUresult r = CU(cuCtxCreate_v2)(&c, 0, 0);
		CHECK_EQ(CU(cuMemFree_v2)(fill), CUDA_SUCCESS);
		return r;
	}
	CHECK(0, "unknown family %s", family);
	return CUDA_SUCCESS;
}

/*
 * OVERSUB_FAMILY names a family that keeps the card's refusal (host.c says
 * why each): it returns CUDA_ERROR_OUT_OF_MEMORY, as its reference lists,
 * and leaves nothing behind, while the share had room for the same bytes.
 */
static int oversub_refused(void)
{
	const char *family = getenv("OVERSUB_FAMILY");
	struct scene s;
	if (family == NULL || scene_start(&s) != 0)
		return 1;
	CHECK_EQ(refused_family(family, &s), CUDA_ERROR_OUT_OF_MEMORY);
	nothing_kept(&s, family);
	share_had_room(&s);
	scene_end(&s);
	return 0;
}

/*
 * cuMemAllocPitch_v2 falls back: linear memory at a pitch that meets what the
 * reference promises (a multiple of 512, above the stub's texture pitch
 * alignment), charged as pitch x height, on no card, freed by cuMemFree_v2.
 * A pitched request past the share is refused with nothing kept. Before
 * host.c knew pitched memory, the card's refusal stood.
 */
static int oversub_pitch(void)
{
	struct scene s;
	if (scene_start(&s) != 0)
		return 1;
	CUdeviceptr p;
	size_t pitch = 0;
	const size_t rows = ASK / 1024;
	CHECK_EQ(CU(cuMemAllocPitch_v2)(&p, &pitch, 1000, rows, 4), CUDA_SUCCESS);
	CHECK_EQ(pitch, 1024);
	CHECK_EQ(s.st->host_bytes, pitch * rows);
	CHECK_EQ(s.st->held[0], s.card);
	CHECK_EQ(t_mine(0) - s.mine, pitch * rows);
	CHECK_EQ(t_region()->hdr.host_mib[0], 300);
	CHECK(p != 0, "no device pointer");
	/* 450 MiB more would pass the 768m share: refused, nothing kept. */
	CUdeviceptr q;
	size_t qpitch;
	CHECK_EQ(CU(cuMemAllocPitch_v2)(&q, &qpitch, 1000, 450 * 1024, 4), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(s.st->host_bytes, pitch * rows);
	CHECK_EQ(t_mine(0) - s.mine, pitch * rows);
	CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	nothing_kept(&s, "pitch after free");
	scene_end(&s);
	return 0;
}

/*
 * Host memory that stood in for device memory belongs to the context that
 * allocated it, and cuCtxDestroy (and a primary context's reset) frees it
 * with the context: its charge and the published host-backed figure go
 * with it. Before, the charge went but host_mib kept reporting the memory
 * (and the exporter with it) for as long as the process lived.
 */
static int oversub_ctx_destroy(void)
{
	struct scene s;
	if (scene_start(&s) != 0)
		return 1;
	CUcontext c;
	CUdeviceptr p;
	CHECK_EQ(CU(cuCtxCreate_v2)(&c, 0, 0), CUDA_SUCCESS);      /* 64 MiB: 132 left on the card */
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, ASK), CUDA_SUCCESS);
	CHECK_EQ(s.st->host_bytes, ASK);
	CHECK_EQ(t_region()->hdr.host_mib[0], 300);
	CHECK_EQ(t_mine(0), s.mine + 64 * MiB + ASK);
	CHECK_EQ(CU(cuCtxDestroy_v2)(c), CUDA_SUCCESS);
	CHECK_EQ(s.st->host_bytes, 0);     /* the driver freed it with the context */
	CHECK_EQ(t_region()->hdr.host_mib[0], 0);
	CHECK_EQ(t_mine(0), s.mine);

	t_ctx(0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, ASK), CUDA_SUCCESS);
	CHECK_EQ(t_region()->hdr.host_mib[0], 300);
	CHECK_EQ(CU(cuDevicePrimaryCtxReset_v2)(0), CUDA_SUCCESS);
	CHECK_EQ(s.st->host_bytes, 0);
	CHECK_EQ(t_region()->hdr.host_mib[0], 0);
	scene_end(&s);
	return 0;
}

/* cuMemGetInfo_v2, cuDeviceTotalMem_v2 and NVML's memory info, against what they should show. */
static void shown(uint64_t want_total, uint64_t want_free, uint64_t want_used, const char *when)
{
	size_t f = 0, t = 0, tot = 0;
	nvmlDevice_t d;
	nvmlMemory_t m = {0};
	CHECK_EQ(CU(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
	CHECK(t == want_total && f == want_free, "%s: cuMemGetInfo free %llu MiB of %llu, want %llu of %llu",
	      when, (unsigned long long)(f / MiB), (unsigned long long)(t / MiB),
	      (unsigned long long)(want_free / MiB), (unsigned long long)(want_total / MiB));
	CHECK_EQ(CU(cuDeviceTotalMem_v2)(&tot, 0), CUDA_SUCCESS);
	CHECK(tot == want_total, "%s: cuDeviceTotalMem %llu MiB, want %llu", when,
	      (unsigned long long)(tot / MiB), (unsigned long long)(want_total / MiB));
	CHECK_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
	CHECK_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(0, &d), NVML_SUCCESS);
	CHECK_EQ(NV(nvmlDeviceGetMemoryInfo)(d, &m), NVML_SUCCESS);
	CHECK(m.total == want_total && m.used == want_used && m.free == want_total - want_used,
	      "%s: NVML total %llu MiB used %llu free %llu, want %llu used %llu", when,
	      (unsigned long long)(m.total / MiB), (unsigned long long)(m.used / MiB),
	      (unsigned long long)(m.free / MiB), (unsigned long long)(want_total / MiB),
	      (unsigned long long)(want_used / MiB));
}

/*
 * What a container sees of its memory under CUDA_OVERSUBSCRIBE=true: its
 * share as the total, even past the card (OVERSUB_SHARE_MIB, the limit
 * run.sh sets), and as free the share minus what it holds, not bounded by
 * what the card has left: cuMemAlloc_v2, what PyTorch's caching allocator
 * and vLLM allocate with, is served from host memory past the card, and
 * vLLM refuses to start when the free memory it reads is below
 * gpu_memory_utilization x total. Without oversubscription
 * (OVERSUB_EXPECT=off) the total is capped at the card and free at what the
 * card has left (the neighbour's memory is not there to be had).
 */
static int oversub_meminfo(void)
{
	const char *expect = getenv("OVERSUB_EXPECT"), *mib = getenv("OVERSUB_SHARE_MIB");
	bool on = expect == NULL || strcmp(expect, "off") != 0;
	uint64_t share = (mib != NULL ? strtoull(mib, NULL, 10) : 768) * MiB, card = 1024 * MiB;
	struct scene s;
	if (scene_start(&s) != 0)
		return 1;
	uint64_t total = on || share < card ? share : card;
	uint64_t card_left = card - 764 * MiB - s.card;     /* the neighbour's 700 MiB and context, ours */
	uint64_t fits = total - s.mine;
	shown(total, on ? fits : (fits < card_left ? fits : card_left), s.mine, "at start");
	if (on) {
		CUdeviceptr p;
		CHECK_EQ(CU(cuMemAlloc_v2)(&p, ASK), CUDA_SUCCESS);
		CHECK_EQ(s.st->host_bytes, ASK);             /* past the card */
		shown(total, fits - ASK, s.mine + ASK, "300 MiB from host memory");
		CUdeviceptr q;
		CHECK_EQ(CU(cuMemAlloc_v2)(&q, fits - ASK), CUDA_SUCCESS);  /* all that free promised */
		shown(total, 0, total, "the share used up");
		CHECK_EQ(CU(cuMemAlloc_v2)(&q, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
		CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	}
	scene_end(&s);
	return t_failed;
}

const struct t_case t_oversub_cases[] = {
	{"oversub_meminfo", oversub_meminfo},
	{"oversub_refused", oversub_refused},
	{"oversub_pitch", oversub_pitch},
	{"oversub_ctx_destroy", oversub_ctx_destroy},
	{NULL, NULL},
};
