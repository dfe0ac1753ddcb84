/*
 * context.c - context creation overhead and context teardown.
 *
 * A context costs device memory the application never asked for (code,
 * local memory, driver heaps). It is measured as the growth of NVML's "used"
 * figure across the creation of the process's context on a device, and is
 * charged like an allocation: a context that does not fit in what is left of
 * the limit is destroyed again and its creation fails with
 * CUDA_ERROR_OUT_OF_MEMORY, which is what the driver itself answers when a
 * device has no room for a context (CUDA Driver API reference, cuCtxCreate).
 * The cost is only known once the driver has created the context, so for
 * the duration of that call the device may hold it beyond the limit.
 * Destroying a context (or releasing the primary context for the last time)
 * frees every allocation made in it, so the ledger drops them as well.
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
	if (bytes != 0)
		VGPU_LOG(VGPU_LOG_DEBUG, "device %d: context overhead %llu bytes", idx,
			 (unsigned long long)bytes);
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
	vgpu_host_forget_owner(ctx);
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

static CUresult do_create(void *p, CUcontext *pctx);

/* Undoes a context creation the limit has no room for. */
static void undo_create(const struct create_args *a, CUcontext ctx)
{
	if (a->variant == 0) {
		if (REAL(cuDevicePrimaryCtxRelease_v2) != NULL)
			REAL(cuDevicePrimaryCtxRelease_v2)(a->dev);
		else if (REAL(cuDevicePrimaryCtxRelease) != NULL)
			REAL(cuDevicePrimaryCtxRelease)(a->dev);
	} else if (REAL(cuCtxDestroy_v2) != NULL) {
		REAL(cuCtxDestroy_v2)(ctx);
	} else if (REAL(cuCtxDestroy) != NULL) {
		REAL(cuCtxDestroy)(ctx);
	}
}

/*
 * The smallest usedGpuMemory among the processes that appeared in NVML's list
 * while the context was created; false if none shows a figure. This process
 * is one of them, and at that instant it holds nothing on the device but the
 * new context, so its figure is the context; the others hold at least a
 * context of the same device. The smallest is therefore this context, or
 * another context there whose size differs only by what that process has
 * allocated or loaded since.
 */
static bool newcomers_min(const struct vgpu_plist *pb, const struct vgpu_plist *pa, uint64_t *out)
{
	unsigned int idx[VGPU_PLIST_MAX], n = vgpu_plist_new(pb, pa, idx);
	bool any = false;
	for (unsigned int k = 0; k < n; k++) {
		unsigned long long mem = pa->mem[idx[k]];
		if (mem == NVML_VALUE_NOT_AVAILABLE)
			continue;
		if (!any || mem < *out)
			*out = mem;
		any = true;
	}
	return any;
}

/*
 * What the context cost: the growth of this process's usedGpuMemory in
 * NVML's process lists when its host pid is known (exact). When it is not
 * (processes started together and no marker could single this one out), the
 * smallest newcomer's figure (newcomers_min). Only without process lists, the
 * growth of the device's "used" figure, which the allocations of any process
 * in that instant inflate: charging a neighbour's allocations to this
 * context would refuse a context that fits.
 */
static uint64_t context_cost(const struct vgpu_plist *pb, const struct vgpu_plist *pa,
			     bool listed, uint64_t dev_before, uint64_t dev_after)
{
	uint32_t src = vgpu_hostpid_source();
	int j = pa->n > 0 ? vgpu_plist_find(pa, (unsigned int)vgpu_hostpid()) : -1;
	if ((src == VGPU_HOSTPID_NVML || src == VGPU_HOSTPID_MARKER) && j >= 0 &&
	    pa->mem[j] != NVML_VALUE_NOT_AVAILABLE) {
		int i = vgpu_plist_find(pb, (unsigned int)vgpu_hostpid());
		uint64_t was = i >= 0 && pb->mem[i] != NVML_VALUE_NOT_AVAILABLE ? pb->mem[i] : 0;
		return overhead(was, pa->mem[j]);
	}
	uint64_t least = 0;
	if (listed && newcomers_min(pb, pa, &least))
		return overhead(0, least);
	return overhead(dev_before, dev_after);
}

/*
 * Runs a context-creating call and charges what it cost on device `dev`.
 * The NVML process lists around it also teach this process its host pid.
 */
static CUresult measured_create(CUdevice dev, CUcontext *pctx, struct create_args *a)
{
	int idx = vgpu_dev_index(dev);
	struct vgpu_plist pb = {0}, pa = {0};
	if ((!vgpu_counting() && !vgpu_cfg.any_sm_limit) || idx < 0)
		return do_create(a, pctx);
	bool listed = vgpu_proc_list(idx, &pb) == 0;
	uint64_t before = nvml_used(idx);
	CUresult res = do_create(a, pctx);
	if (res != CUDA_SUCCESS || pctx == NULL)
		return res;
	uint64_t after = nvml_used(idx);
	listed = listed && vgpu_proc_list(idx, &pa) == 0;
	if (listed)
		vgpu_hostpid_discover(idx, &pb, &pa, *pctx);
	vgpu_hostpid_fallback();
	if (!vgpu_counting())
		return res;
	uint64_t bytes = context_cost(&pb, &pa, listed, before, after);
	if (bytes != 0 && vgpu_charge(idx, bytes) != CUDA_SUCCESS) {
		undo_create(a, *pctx);
		VGPU_LOG(VGPU_LOG_INFO, "device %d: a context takes %llu bytes, more than the limit leaves",
			 idx, (unsigned long long)bytes);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	remember(*pctx, idx, a->variant == 0, bytes);
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
	return measured_create(dev, pctx, &a);
}

VGPU_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuCtxCreate_v2);
	struct create_args a = {.variant = 2, .flags = flags, .dev = dev};
	return measured_create(dev, pctx, &a);
}

VGPU_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *params, int numParams,
				    unsigned int flags, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuCtxCreate_v3);
	struct create_args a = {3, flags, dev, params, numParams};
	return measured_create(dev, pctx, &a);
}

VGPU_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *params,
				    unsigned int flags, CUdevice dev)
{
	VGPU_ENTER_CUDA(cuCtxCreate_v4);
	struct create_args a = {4, flags, dev, params, 0};
	return measured_create(dev, pctx, &a);
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
	if ((!vgpu_counting() && !vgpu_cfg.any_sm_limit) || idx < 0)
		return do_create(&a, pctx);
	pthread_mutex_lock(&mu);
	bool first = primary_refs[idx] == 0;
	pthread_mutex_unlock(&mu);
	CUresult res = first ? measured_create(dev, pctx, &a) : do_create(&a, pctx);
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
		vgpu_host_forget_owner(ctx);
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
