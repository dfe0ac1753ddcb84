/*
 * driver.c - the driver and NVML entry points gpu_check calls, resolved with
 * dlopen + dlsym like a CUDA runtime, and the small helpers every check
 * process shares (context, UUID, NVML handle, error names).
 *
 * In a check process libvgpu is preloaded and interposes dlsym, so the
 * hooked names resolve to libvgpu's hooks and everything else to the driver:
 * exactly what an application sees.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_check.h"

enum gc_lib { CUDA, NVML };

struct gc_sym {
	enum gc_lib lib;
	const char *name;
	size_t offset;
};

static const struct gc_sym syms[] = {
#define GC_SYM(lib, name, ret, params) {lib, #name, offsetof(struct gc_api, name)},
	GC_ENTRY_POINTS(GC_SYM)
#undef GC_SYM
};

/* POSIX guarantees function and data pointers share one representation (dlsym). */
static void **slot(struct gc_api *api, const struct gc_sym *s)
{
	return (void **)((char *)api + s->offset);
}

void *gc_api_sym(const struct gc_api *api, const char *name)
{
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
		if (strcmp(syms[i].name, name) == 0)
			return *(void *const *)((const char *)api + syms[i].offset);
	return NULL;
}

/*
 * Opens libcuda.so.1 (and libnvidia-ml.so.1 when asked) by their sonames, as
 * the CUDA runtime and NVML users do. Returns -1 when libcuda cannot be opened.
 */
int gc_api_open(struct gc_api *api, bool with_nvml)
{
	memset(api, 0, sizeof(*api));
	api->cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
	if (api->cuda == NULL)
		return -1;
	if (with_nvml)
		api->nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_GLOBAL);
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		void *lib = syms[i].lib == CUDA ? api->cuda : api->nvml;
		*slot(api, &syms[i]) = lib != NULL ? dlsym(lib, syms[i].name) : NULL;
	}
	if (api->nvml != NULL) {
		nvmlReturn_t rc = api->nvmlInit_v2 != NULL ? api->nvmlInit_v2()
			: api->nvmlInit != NULL ? api->nvmlInit() : NVML_ERROR_FUNCTION_NOT_FOUND;
		api->nvml_init_rc = rc;
		api->nvml_ready = rc == NVML_SUCCESS;
	}
	return 0;
}

/* Lists in buf the entry points of `names` (NULL-terminated) that are missing. */
bool gc_missing(const struct gc_api *api, const char *const *names, char *buf, size_t len)
{
	size_t used = 0;
	buf[0] = '\0';
	for (; *names != NULL; names++) {
		if (gc_api_sym(api, *names) != NULL)
			continue;
		int n = snprintf(buf + used, len - used, "%s%s", used ? ", " : "", *names);
		if (n > 0 && (size_t)n < len - used)
			used += (size_t)n;
	}
	return buf[0] != '\0';
}

/*
 * "CUDA_ERROR_OUT_OF_MEMORY (2)": the codes the checks expect are named even
 * by a driver without cuGetErrorName (the stub); the rest by the driver.
 */
const char *gc_cuerr(const struct gc_api *api, CUresult res)
{
	static const struct { CUresult code; const char *name; } known[] = {
		{CUDA_SUCCESS, "CUDA_SUCCESS"},
		{CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE"},
		{CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY"},
		{CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED"},
		{CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE"},
		{CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE"},
		{CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT"},
		{CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE"},
		{CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND"},
		{CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED"},
	};
	static __thread char bufs[4][96];
	static __thread unsigned next;
	char *buf = bufs[next++ % 4];
	const char *name = NULL;
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]) && name == NULL; i++)
		if (known[i].code == res)
			name = known[i].name;
	if (name == NULL && api->cuGetErrorName != NULL &&
	    api->cuGetErrorName(res, &name) != CUDA_SUCCESS)
		name = NULL;
	snprintf(buf, sizeof(bufs[0]), "%s (%d)", name != NULL ? name : "CUDA error", res);
	return buf;
}

/*
 * Makes device 0 (the only visible one) current the way the CUDA runtime
 * does: retain its primary context ("Primary Context Management"), falling
 * back to a created context on drivers without it.
 */
int gc_open_context(const struct gc_api *api, CUdevice *dev, char *err, size_t len)
{
	static const char *const need[] = {"cuInit", "cuDeviceGet", "cuCtxSetCurrent", NULL};
	char miss[128];
	CUcontext ctx = NULL;
	CUresult r;
	if (gc_missing(api, need, miss, sizeof(miss))) {
		snprintf(err, len, "driver lacks %s", miss);
		return -1;
	}
	if ((r = api->cuInit(0)) != CUDA_SUCCESS) {
		snprintf(err, len, "cuInit returned %s", gc_cuerr(api, r));
		return -1;
	}
	if ((r = api->cuDeviceGet(dev, 0)) != CUDA_SUCCESS) {
		snprintf(err, len, "cuDeviceGet(0) returned %s", gc_cuerr(api, r));
		return -1;
	}
	if (api->cuDevicePrimaryCtxRetain != NULL)
		r = api->cuDevicePrimaryCtxRetain(&ctx, *dev);
	else if (api->cuCtxCreate_v2 != NULL)
		r = api->cuCtxCreate_v2(&ctx, 0, *dev);
	else
		r = CUDA_ERROR_NOT_FOUND;
	if (r == CUDA_SUCCESS)
		r = api->cuCtxSetCurrent(ctx);
	if (r != CUDA_SUCCESS) {
		snprintf(err, len, "creating a context on device 0 returned %s", gc_cuerr(api, r));
		return -1;
	}
	return 0;
}

/*
 * The first step of every check: the entry points it needs (NULL-terminated,
 * or NULL for none beyond the context's) and device 0's context. On failure
 * writes the verdict, SKIP naming missing symbols or FAIL, and returns false.
 */
bool gc_prepare(const struct gc_api *api, const char *const *need, CUdevice *dev)
{
	char why[512];
	if (need != NULL && gc_missing(api, need, why, sizeof(why))) {
		gc_verdict(GC_SKIP, "driver lacks %s", why);
		return false;
	}
	if (gc_open_context(api, dev, why, sizeof(why)) != 0) {
		gc_verdict(GC_FAIL, "%s", why);
		return false;
	}
	return true;
}

/* NVML's spelling of a CUuuid: "GPU-" and 8-4-4-4-12 lower-case hex digits. */
void gc_format_uuid(const gc_uuid *u, char *buf, size_t len)
{
	const unsigned char *b = u->bytes;
	snprintf(buf, len,
		 "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
		 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12],
		 b[13], b[14], b[15]);
}

/*
 * Finds the NVML device with this UUID, with nvmlDeviceGetHandleByUUID or, on
 * an NVML without it, by scanning the devices' UUIDs. Returns -1 if absent.
 */
int gc_nvml_find(const struct gc_api *api, const char *uuid, nvmlDevice_t *dev,
		 unsigned int *index)
{
	unsigned int count = 0;
	if (!api->nvml_ready)
		return -1;
	if (api->nvmlDeviceGetHandleByUUID != NULL &&
	    api->nvmlDeviceGetHandleByUUID(uuid, dev) == NVML_SUCCESS) {
		if (api->nvmlDeviceGetIndex == NULL ||
		    api->nvmlDeviceGetIndex(*dev, index) != NVML_SUCCESS)
			*index = 0;
		return 0;
	}
	if (api->nvmlDeviceGetCount_v2 == NULL || api->nvmlDeviceGetHandleByIndex_v2 == NULL ||
	    api->nvmlDeviceGetUUID == NULL || api->nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS)
		return -1;
	for (unsigned int i = 0; i < count; i++) {
		char got[NVML_DEVICE_UUID_BUFFER_SIZE];
		if (api->nvmlDeviceGetHandleByIndex_v2(i, dev) == NVML_SUCCESS &&
		    api->nvmlDeviceGetUUID(*dev, got, sizeof(got)) == NVML_SUCCESS &&
		    strcmp(got, uuid) == 0) {
			*index = i;
			return 0;
		}
	}
	return -1;
}

/*
 * A check is only meaningful if libvgpu really sits in front of the driver:
 * a hooked entry point must resolve into the preloaded library. A loader
 * that ignored LD_PRELOAD (wrong architecture, missing file) would otherwise
 * turn every check into a test of the bare driver.
 */
bool gc_preload_ok(const struct gc_api *api, char *err, size_t len)
{
	const char *preload = getenv("LD_PRELOAD");
	char want[PATH_MAX], got[PATH_MAX];
	Dl_info info;
	void *fn = gc_api_sym(api, "cuMemAlloc_v2");
	if (preload == NULL || realpath(preload, want) == NULL) {
		snprintf(err, len, "LD_PRELOAD=%s does not name a file",
			 preload != NULL ? preload : "(unset)");
		return false;
	}
	if (fn == NULL || dladdr(fn, &info) == 0 || info.dli_fname == NULL ||
	    realpath(info.dli_fname, got) == NULL) {
		snprintf(err, len, "cannot tell which library provides cuMemAlloc_v2");
		return false;
	}
	if (strcmp(want, got) != 0) {
		snprintf(err, len, "cuMemAlloc_v2 resolves into %s, not the preloaded %s", got,
			 want);
		return false;
	}
	return true;
}
