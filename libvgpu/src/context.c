/*
 * context.c - context creation overhead and context teardown.
 *
 * A context costs device memory the application never asked for (code,
 * local memory, driver heaps). It is measured as the growth of NVML's "used"
 * figure across the creation of the process's context on a device, and is
 * charged without a limit check: refusing a context would only make the
 * failure harder to understand, while the charge makes later allocations and
 * cuMemGetInfo see it. Destroying a context (or releasing the primary context
 * for the last time) frees every allocation made in it, so the ledger drops
 * them as well.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>

#include "hooks.h"

#define MAX_CTX 64
#define MAX_OVERHEAD (UINT64_C(1) << 30)

struct ctx_rec {
	CUcontext ctx;
	int idx;
	bool primary;
	uint64_t overhead;
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct ctx_rec ctxs[MAX_CTX];
static int nctx;
static int primary_refs[VGPU_MAX_DEVICES];

static uint64_t nvml_used(int idx)
{
	nvmlDevice_t dev = vgpu_nvml_device(idx);
	nvmlMemory_t mem;
	if (dev == NULL || REAL(nvmlDeviceGetMemoryInfo) == NULL ||
	    REAL(nvmlDeviceGetMemoryInfo)(dev, &mem) != NVML_SUCCESS)
		return UINT64_MAX;
	return mem.used;
}

static uint64_t overhead(uint64_t before, uint64_t after)
{
	if (before == UINT64_MAX || after == UINT64_MAX || after <= before)
		return 0;
	return after - before > MAX_OVERHEAD ? MAX_OVERHEAD : after - before;
}

static void remember(CUcontext ctx, int idx, bool primary, uint64_t bytes)
{
	pthread_mutex_lock(&mu);
	if (nctx < MAX_CTX)
		ctxs[nctx++] = (struct ctx_rec){ctx, idx, primary, bytes};
	pthread_mutex_unlock(&mu);
	if (bytes != 0) {
		vgpu_register();
		vgpu_region_force(idx, (int64_t)bytes);
		VGPU_LOG(VGPU_LOG_DEBUG, "device %d: context overhead %llu bytes", idx,
			 (unsigned long long)bytes);
	}
}

/* Drops the context's record and every allocation the driver freed with it. */
static void forget(CUcontext ctx)
{
	uint64_t bytes = 0;
	int idx = -1;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nctx; i++) {
		if (ctxs[i].ctx == ctx) {
			bytes = ctxs[i].overhead;
			idx = ctxs[i].idx;
			ctxs[i] = ctxs[--nctx];
			break;
		}
	}
	pthread_mutex_unlock(&mu);
	if (bytes != 0)
		vgpu_uncharge(idx, bytes);
	int dev_hit[VGPU_MAX_DEVICES];
	uint64_t dev_bytes[VGPU_MAX_DEVICES];
	vgpu_ledger_purge_owner(ctx, dev_hit, dev_bytes);
	for (int d = 0; d < VGPU_MAX_DEVICES; d++)
		if (dev_hit[d])
			vgpu_uncharge(d, dev_bytes[d]);
}

struct create_args {
	int variant;
	unsigned int flags;
	CUdevice dev;
	void *params;
	int nparams;
};

typedef CUresult (*create_fn)(void *arg, CUcontext *pctx);

/* Runs a context-creating call and charges what it cost on device `dev`. */
static CUresult measured_create(CUdevice dev, CUcontext *pctx, create_fn fn, void *arg)
{
	int idx = vgpu_dev_index(dev);
	if (!vgpu_counting() || idx < 0)
		return fn(arg, pctx);
	uint64_t before = nvml_used(idx);
	CUresult res = fn(arg, pctx);
	if (res == CUDA_SUCCESS && pctx != NULL)
		remember(*pctx, idx, ((struct create_args *)arg)->variant == 0,
			 overhead(before, nvml_used(idx)));
	return res;
}

static CUresult do_create(void *p, CUcontext *pctx)
{
	struct create_args *a = p;
	switch (a->variant) {
	case 1: return REAL(cuCtxCreate)(pctx, a->flags, a->dev);
	case 2: return REAL(cuCtxCreate_v2)(pctx, a->flags, a->dev);
	case 3: return REAL(cuCtxCreate_v3)(pctx, a->params, a->nparams, a->flags, a->dev);
	case 4: return REAL(cuCtxCreate_v4)(pctx, a->params, a->flags, a->dev);
	default: return REAL(cuDevicePrimaryCtxRetain)(pctx, a->dev);
	}
}

VGPU_EXPORT CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuCtxCreate);
	struct create_args a = {.variant = 1, .flags = flags, .dev = dev};
	return measured_create(dev, pctx, do_create, &a);
}

VGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuCtxCreate_v2);
	struct create_args a = {.variant = 2, .flags = flags, .dev = dev};
	return measured_create(dev, pctx, do_create, &a);
}

VGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int numParams,
				    unsigned int flags, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuCtxCreate_v3);
	struct create_args a = {3, flags, dev, params, numParams};
	return measured_create(dev, pctx, do_create, &a);
}

VGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params,
				    unsigned int flags, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuCtxCreate_v4);
	struct create_args a = {4, flags, dev, params, 0};
	return measured_create(dev, pctx, do_create, &a);
}

static CUresult destroy(CUresult (*real)(CUcontext), CUcontext ctx)
{
	CUresult res = real(ctx);
	if (res == CUDA_SUCCESS && vgpu_counting())
		forget(ctx);
	return res;
}

VGPU_EXPORT CUresult cuCtxDestroy(CUcontext ctx)
{
	VGPU_ENTER_CUDA(cuCtxDestroy);
	return destroy(REAL(cuCtxDestroy), ctx);
}

VGPU_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	VGPU_ENTER_CUDA(cuCtxDestroy_v2);
	return destroy(REAL(cuCtxDestroy_v2), ctx);
}

/* The primary context exists while its retain count is positive. */
VGPU_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuDevicePrimaryCtxRetain);
	int idx = vgpu_dev_index(dev);
	struct create_args a = {.variant = 0, .dev = dev};
	if (!vgpu_counting() || idx < 0)
		return do_create(&a, pctx);
	pthread_mutex_lock(&mu);
	bool first = primary_refs[idx] == 0;
	pthread_mutex_unlock(&mu);
	CUresult res = first ? measured_create(dev, pctx, do_create, &a) : do_create(&a, pctx);
	if (res == CUDA_SUCCESS) {
		pthread_mutex_lock(&mu);
		primary_refs[idx]++;
		pthread_mutex_unlock(&mu);
	}
	return res;
}

static CUcontext primary_of(int idx)
{
	CUcontext ctx = NULL;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < nctx; i++)
		if (ctxs[i].idx == idx && ctxs[i].primary)
			ctx = ctxs[i].ctx;
	pthread_mutex_unlock(&mu);
	return ctx;
}

static CUresult primary_release(CUresult (*real)(CUdevice), CUdevice dev)
{
	CUcontext ctx = NULL;
	int idx = vgpu_dev_index(dev);
	bool counted = vgpu_counting() && idx >= 0;
	if (counted)
		ctx = primary_of(idx);  /* look it up before it may be destroyed */
	CUresult res = real(dev);
	if (res != CUDA_SUCCESS || !counted)
		return res;
	pthread_mutex_lock(&mu);
	bool last = primary_refs[idx] > 0 && --primary_refs[idx] == 0;
	pthread_mutex_unlock(&mu);
	if (last && ctx != NULL)
		forget(ctx);
	return res;
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev)
{
	VGPU_ENTER_CUDA(cuDevicePrimaryCtxRelease);
	return primary_release(REAL(cuDevicePrimaryCtxRelease), dev);
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
	VGPU_ENTER_CUDA(cuDevicePrimaryCtxRelease_v2);
	return primary_release(REAL(cuDevicePrimaryCtxRelease_v2), dev);
}

/* Reset frees every allocation of the primary context but keeps it alive. */
static CUresult primary_reset(CUresult (*real)(CUdevice), CUdevice dev)
{
	int idx = vgpu_dev_index(dev);
	CUresult res = real(dev);
	if (res != CUDA_SUCCESS || !vgpu_counting() || idx < 0)
		return res;
	CUcontext ctx = primary_of(idx);
	if (ctx != NULL) {
		int hit[VGPU_MAX_DEVICES];
		uint64_t bytes[VGPU_MAX_DEVICES];
		vgpu_ledger_purge_owner(ctx, hit, bytes);
		for (int d = 0; d < VGPU_MAX_DEVICES; d++)
			if (hit[d])
				vgpu_uncharge(d, bytes[d]);
	}
	return res;
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev)
{
	VGPU_ENTER_CUDA(cuDevicePrimaryCtxReset);
	return primary_reset(REAL(cuDevicePrimaryCtxReset), dev);
}

VGPU_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev)
{
	VGPU_ENTER_CUDA(cuDevicePrimaryCtxReset_v2);
	return primary_reset(REAL(cuDevicePrimaryCtxReset_v2), dev);
}

void vgpu_context_reset(void)
{
	pthread_mutex_init(&mu, NULL);
	nctx = 0;
	memset(primary_refs, 0, sizeof(primary_refs));
}
