/* t_api.c - how runtimes reach the driver: dlsym, cuGetProcAddress, environment. */
#include "test.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

int probe_next(void);

static int in_lib(void *p, const char *lib)
{
	Dl_info info;
	return p != NULL && dladdr(p, &info) && info.dli_fname && strstr(info.dli_fname, lib);
}

/* dlopen + dlsym: hooked names give libvgpu's entry points, others the driver's. */
static int dlsym_paths(void)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	void *nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	CHECK(cuda && nvml, "dlopen failed");
	CHECK(in_lib(dlsym(cuda, "cuMemAlloc_v2"), "libvgpu"), "cuMemAlloc_v2 not hooked");
	CHECK(in_lib(dlsym(cuda, "cuLaunchKernel"), "libvgpu"), "cuLaunchKernel not hooked");
	CHECK(in_lib(dlsym(cuda, "cuGetProcAddress_v2"), "libvgpu"), "procaddr not hooked");
	CHECK(in_lib(dlsym(nvml, "nvmlDeviceGetMemoryInfo"), "libvgpu"), "nvml not hooked");
	CHECK(in_lib(dlsym(cuda, "cuDriverGetVersion"), "libcuda"), "pass-through not real");
	CHECK(in_lib(dlsym(nvml, "nvmlInit_v2"), "libnvidia-ml"), "nvml pass-through not real");
	CHECK(in_lib(dlsym(RTLD_DEFAULT, "cuMemFree_v2"), "libvgpu"), "RTLD_DEFAULT not hooked");
	CHECK(dlsym(cuda, "cuNoSuchFunction") == NULL, "unknown symbol found");
	CHECK(dlerror() != NULL, "dlerror not set");
	/* A hooked name the handle's library does not define is not invented. */
	void *self = dlopen(NULL, RTLD_NOW);
	CHECK(dlsym(self, "cuMemAlloc_v2") == NULL || in_lib(dlsym(self, "cuMemAlloc_v2"), "libvgpu"),
	      "odd lookup");
	/*
	 * RTLD_NEXT stays relative to the caller: libprobe1 (loaded after the
	 * preloaded libvgpu) asks for the next probe_dup and must get libprobe2's.
	 * Resolved relative to libvgpu it would find its own (1).
	 */
	CHECK_EQ(probe_next(), 2);
	return 0;
}

/* cuGetProcAddress(_v2) hands out hooks for the variant the driver picks. */
static int procaddr(void)
{
	CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
		CU(cuGetProcAddress_v2);
	CUresult (*gpa1)(const char *, void **, int, cuuint64_t) = CU(cuGetProcAddress);
	void *fn = NULL;
	CUdriverProcAddressQueryResult st = 99;
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);

	CHECK_EQ(gpa2("cuMemAlloc", &fn, 12000, 0, &st), CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), "cuMemAlloc -> hook of _v2");
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
	CHECK_EQ(gpa2("cuMemAlloc", &fn, 3000, 0, &st), CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemAlloc"), "old version -> hook of v1");
	CHECK_EQ(gpa2("cuLaunchKernel", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st),
		 CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuLaunchKernel_ptsz"), "per-thread -> hook of _ptsz");
	CHECK_EQ(gpa2("cuGetProcAddress", &fn, 12000, 0, &st), CUDA_SUCCESS);
	CHECK(fn == (void *)gpa2, "cuGetProcAddress resolves to its own hook");
	CHECK_EQ(gpa2("cuDriverGetVersion", &fn, 12000, 0, &st), CUDA_SUCCESS);
	CHECK(in_lib(fn, "libcuda"), "pass-through symbol must be the driver's");
	CHECK_EQ(gpa2("cuNoSuchThing", &fn, 12000, 0, &st), CUDA_ERROR_NOT_FOUND);
	CHECK_EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
	CHECK(fn == NULL, "pfn must stay NULL");
	CHECK_EQ(gpa1("cuMemFree", &fn, 12000, 0), CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemFree_v2"), "v1 entry point hooks too");
	CHECK_EQ(gpa1("nvmlInit", &fn, 12000, 0), CUDA_ERROR_NOT_FOUND);

	/* Entry points obtained this way enforce the limit (1g). */
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*setcur)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUcontext ctx;
	CUdeviceptr p;
	gpa2("cuDevicePrimaryCtxRetain", (void **)&retain, 12000, 0, NULL);
	gpa2("cuCtxSetCurrent", (void **)&setcur, 12000, 0, NULL);
	gpa2("cuMemAlloc", (void **)&alloc, 12000, 0, NULL);
	CHECK_EQ(retain(&ctx, 0), CUDA_SUCCESS);
	CHECK_EQ(setcur(ctx), CUDA_SUCCESS);
	CHECK_EQ(alloc(&p, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(alloc(&p, 512 * MiB), CUDA_SUCCESS);
	return 0;
}

/*
 * A driver that hands out internal entry points (VGPU_STUB_GPA_INTERNAL=1):
 * every hooked name resolves to libvgpu's hook of the variant the documented
 * rule picks, and the limit (1g) holds through the pointers obtained.
 */
static int procaddr_internal(void)
{
	static const struct {
		const char *symbol;
		int version;
		cuuint64_t flags;
		const char *variant;    /* libvgpu's export expected, NULL: not hooked */
	} cases[] = {
		{"cuMemAlloc", 12000, 0, "cuMemAlloc_v2"},
		{"cuMemAlloc", 3000, 0, "cuMemAlloc"},
		{"cuMemFree", 12040, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuMemFree_v2"},
		{"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		 "cuLaunchKernel_ptsz"},
		{"cuLaunchKernel", 6050, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, "cuLaunchKernel"},
		{"cuLaunchKernel", 12000, CU_GET_PROC_ADDRESS_LEGACY_STREAM, "cuLaunchKernel"},
		{"cuMemAllocAsync", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		 "cuMemAllocAsync_ptsz"},
		{"cuCtxCreate", 11040, 0, "cuCtxCreate_v3"},
		{"cuCtxCreate", 12050, 0, "cuCtxCreate_v4"},
		{"cuCtxCreate", 11000, 0, "cuCtxCreate_v2"},
		{"cuDevicePrimaryCtxRelease", 12000, 0, "cuDevicePrimaryCtxRelease_v2"},
		{"cuMemCreate", 12000, 0, "cuMemCreate"},
		{"cuMemMap", 12000, 0, "cuMemMap"},
		{"cuMemUnmap", 12000, 0, "cuMemUnmap"},
		{"cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2"},
		{"cuGetProcAddress", 11080, 0, "cuGetProcAddress"},
		{"cuGraphLaunch", 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
		 "cuGraphLaunch_ptsz"},
		{"cuDriverGetVersion", 12000, 0, NULL},
	};
	CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
		CU(cuGetProcAddress_v2);
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *fn = NULL;
		CUdriverProcAddressQueryResult st = 99;
		CUresult r = gpa2(cases[i].symbol, &fn, cases[i].version, cases[i].flags, &st);
		CHECK(r == CUDA_SUCCESS && st == CU_GET_PROC_ADDRESS_SUCCESS, "%s@%d: rc %d status %d",
		      cases[i].symbol, cases[i].version, r, st);
		if (cases[i].variant != NULL)
			CHECK(fn == dlsym(RTLD_DEFAULT, cases[i].variant), "%s@%d flags %llu: want the hook of %s",
			      cases[i].symbol, cases[i].version, (unsigned long long)cases[i].flags,
			      cases[i].variant);
		else
			CHECK(in_lib(fn, "libcuda"), "%s must be the driver's own", cases[i].symbol);
	}
	/* Calls through the pointers are counted: 1g limit, 64 MiB context. */
	CUresult (*retain)(CUcontext *, CUdevice);
	CUresult (*setcur)(CUcontext);
	CUresult (*alloc)(CUdeviceptr *, size_t);
	CUresult (*release)(CUdeviceptr);
	CUcontext ctx;
	CUdeviceptr p, q;
	gpa2("cuDevicePrimaryCtxRetain", (void **)&retain, 12000, 0, NULL);
	gpa2("cuCtxSetCurrent", (void **)&setcur, 12000, 0, NULL);
	gpa2("cuMemAlloc", (void **)&alloc, 12000, 0, NULL);
	gpa2("cuMemFree", (void **)&release, 12000, 0, NULL);
	CHECK_EQ(retain(&ctx, 0), CUDA_SUCCESS);
	CHECK_EQ(setcur(ctx), CUDA_SUCCESS);
	CHECK_EQ(alloc(&p, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(alloc(&p, 900 * MiB), CUDA_SUCCESS);
	CHECK_EQ(alloc(&q, 100 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(release(p), CUDA_SUCCESS);
	CHECK_EQ(alloc(&q, 100 * MiB), CUDA_SUCCESS);
	CHECK_EQ(STUB(vgpuStubStats)()->held[0], 64 * MiB + 100 * MiB);
	return 0;
}

/* Child of procaddr_future: a newer runtime asks a newer driver. */
static int child_procaddr_future(void)
{
	CUresult (*gpa2)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *) =
		CU(cuGetProcAddress_v2);
	void *fn = (void *)1;
	CUdriverProcAddressQueryResult st = 99;
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	for (int i = 0; i < 3; i++) {
		CHECK_EQ(gpa2("cuMemAlloc", &fn, 13090, 0, &st), CUDA_ERROR_NOT_FOUND);
		CHECK(fn == NULL, "an unknown variant must not be handed out");
		CHECK_EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
	}
	/* The variants libvgpu knows still resolve to its hooks. */
	CHECK_EQ(gpa2("cuMemAlloc", &fn, 12080, 0, &st), CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), "known variant not hooked");
	return 0;
}

/*
 * A driver that knows a variant libvgpu does not (VGPU_STUB_GPA_FUTURE=1):
 * refused, so nothing reaches the driver unlimited, and said once on stderr.
 */
static int procaddr_future(void)
{
	static const char *const env[] = {"VGPU_STUB_GPA_FUTURE=1", "VGPU_STUB_GPA_INTERNAL=1", NULL};
	int rc;
	const char *err = t_child_stderr("child_procaddr_future", env, &rc);
	CHECK_EQ(rc, 0);
	CHECK(t_count(err, "cuGetProcAddress(\"cuMemAlloc\", 13090)") == 1,
	      "the refusal must be reported once; stderr:\n%s", err);
	CHECK(strstr(err, "cuMemAlloc_v2") != NULL, "the message names the variant libvgpu knows");
	return 0;
}

/* Child: bad settings everywhere; the program works and is unlimited. */
static int child_env_invalid(void)
{
	CUdeviceptr p;
	size_t f, t;
	t_ctx(0);
	for (int i = 0; i < 5; i++) {
		CHECK_EQ(CU(cuMemAlloc_v2)(&p, 4 * GiB), CUDA_SUCCESS);
		CHECK_EQ(CU(cuMemGetInfo_v2)(&f, &t), CUDA_SUCCESS);
		CHECK_EQ(CU(cuMemFree_v2)(p), CUDA_SUCCESS);
	}
	CHECK_EQ(t, 16 * GiB);
	return 0;
}

/* Invalid values are reported once each on stderr and then ignored. */
static int env_invalid(void)
{
	static const char *const env[] = {
		"CUDA_DEVICE_MEMORY_LIMIT=lots", "CUDA_DEVICE_MEMORY_LIMIT_0=12q",
		"CUDA_DEVICE_MEMORY_LIMIT_X=1g", "CUDA_DEVICE_SM_LIMIT=abc",
		"CUDA_TASK_PRIORITY=high", "GPU_CORE_UTILIZATION_POLICY=sometimes",
		"LIBCUDA_LOG_LEVEL=chatty", NULL};
	int rc;
	const char *err = t_child_stderr("child_env_invalid", env, &rc);
	CHECK_EQ(rc, 0);
	static const char *const names[] = {
		"CUDA_DEVICE_MEMORY_LIMIT=\"lots\"", "CUDA_DEVICE_MEMORY_LIMIT_0=\"12q\"",
		"CUDA_DEVICE_MEMORY_LIMIT_X ignored", "CUDA_DEVICE_SM_LIMIT=\"abc\"",
		"CUDA_TASK_PRIORITY=\"high\"", "GPU_CORE_UTILIZATION_POLICY=\"sometimes\"",
		"LIBCUDA_LOG_LEVEL=\"chatty\""};
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		CHECK(t_count(err, names[i]) == 1, "%s reported %d times; stderr:\n%s", names[i],
		      t_count(err, names[i]), err);
	return 0;
}

/*
 * Minimal driver without VMM, pools, cuGetProcAddress_v2 and NVML process
 * utilisation: the missing features are off, everything else works.
 */
static int minimal_driver(void)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_NOW);
	CHECK(dlsym(cuda, "cuMemCreate") == NULL, "missing symbol must stay missing");
	CHECK(dlsym(cuda, "cuGetProcAddress_v2") == NULL, "missing symbol must stay missing");
	t_ctx(0);
	CUdeviceptr p;
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 2 * GiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuMemAlloc_v2)(&p, 512 * MiB), CUDA_SUCCESS);
	void *fn = NULL;
	CHECK_EQ(CU(cuGetProcAddress)("cuMemAlloc", &fn, 12000, 0), CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemAlloc_v2"), "v1 procaddr still hooks");
	/* The SM limiter is off (no NVML utilisation): launches are not throttled. */
	uint64_t t0 = STUB(vgpuStubNowNs)();
	for (int i = 0; i < 2000; i++)
		CHECK_EQ(CU(cuLaunchKernel)((CUfunction)1, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL),
			 CUDA_SUCCESS);
	CHECK(STUB(vgpuStubNowNs)() - t0 < 2000000000u, "launches were throttled");
	return 0;
}

const struct t_case t_api_cases[] = {
	{"dlsym_paths", dlsym_paths},
	{"procaddr", procaddr},
	{"procaddr_internal", procaddr_internal},
	{"procaddr_future", procaddr_future},
	{"child_procaddr_future", child_procaddr_future},
	{"env_invalid", env_invalid},
	{"child_env_invalid", child_env_invalid},
	{"minimal_driver", minimal_driver},
	{NULL, NULL},
};
