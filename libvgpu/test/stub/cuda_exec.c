/*
 * cuda_exec.c - stub kernel execution and cuGetProcAddress.
 *
 * A launch of B blocks on a device with S SMs keeps the launching process's
 * device timeline busy for B/S * VGPU_STUB_WAVE_NS. Launches queue behind
 * each other; when more than 4 ms of work is queued the launch blocks, as the
 * real driver's push buffer does. NVML utilisation (nvml_stub.c) is derived
 * from the busy time completed on each timeline.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "stub_int.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static uint64_t completed(const struct stub_proc *p, uint64_t t)
{
	uint64_t until = __atomic_load_n(&p->busy_until_ns, __ATOMIC_ACQUIRE);
	uint64_t enq = __atomic_load_n(&p->enq_ns, __ATOMIC_ACQUIRE);
	uint64_t pending = until > t ? until - t : 0;
	return enq > pending ? enq - pending : 0;
}

uint64_t vgpuStubBusyNs(int phys, int pid)
{
	if (stub_remote())
		return stub_remote_busy(phys, pid);
	struct stub_proc *p = stub_proc_rec(phys, pid, 0);
	return p ? completed(p, vgpuStubNowNs()) : 0;
}

uint64_t vgpuStubDryNs(int phys, int pid)
{
	struct stub_proc *p = stub_remote() ? NULL : stub_proc_rec(phys, pid, 0);
	return p ? __atomic_load_n(&p->dry_ns, __ATOMIC_RELAXED) : 0;
}

static void sleep_ns(uint64_t ns)
{
	struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
	nanosleep(&ts, NULL);
}

/*
 * VGPU_STUB_TIMESLICE: the kernel queues behind every process's work on the
 * device (a compare-and-swap on the shared device timeline, as processes
 * share no mutex), so two busy processes each get about half the device. This
 * is what NVIDIA documents for a GPU without MPS: each process has its own
 * context, and "when processes share the GPU their scheduling resources
 * must be swapped on and off the GPU", where MPS lets "kernel and memcopy
 * operations from different processes overlap" (docs.nvidia.com/deploy/mps,
 * the benefits listed on its index page). A launch is asynchronous and
 * returns once queued; the driver's launch queue is finite, so a launch
 * into a deep queue blocks (CUDA C++ Programming Guide, asynchronous
 * concurrent execution); VGPU_STUB_MAX_QUEUE_NS is that depth in time. The
 * dry-time counter is the test's instrument, not driver behaviour. The
 * process's own record keeps what NVML utilisation is derived from.
 */
static CUresult launch_timesliced(struct stub_dev *d, struct stub_proc *p, uint64_t dur)
{
	uint64_t now = vgpuStubNowNs();
	uint64_t cur = __atomic_load_n(&d->busy_until_ns, __ATOMIC_ACQUIRE), until;
	do {
		until = (cur > now ? cur : now) + dur;
	} while (!__atomic_compare_exchange_n(&d->busy_until_ns, &cur, until, 0, __ATOMIC_ACQ_REL,
					      __ATOMIC_ACQUIRE));
	pthread_mutex_lock(&mu);
	uint64_t prev = p->busy_until_ns;
	if (prev != 0 && prev < now)
		__atomic_fetch_add(&p->dry_ns, now - prev, __ATOMIC_RELAXED);
	__atomic_store_n(&p->enq_ns, p->enq_ns + dur, __ATOMIC_RELEASE);
	__atomic_store_n(&p->busy_until_ns, until, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&mu);
	uint64_t maxq = vgpuStubShared()->max_queue_ns;
	if (until > now + maxq)
		sleep_ns(until - now - maxq);
	return CUDA_SUCCESS;
}

static CUresult launch(uint64_t blocks)
{
	STUB_NEED_INIT();
	struct stub_ctx *c = stub_current();
	if (c == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	struct stub_shared *g = vgpuStubShared();
	struct stub_stats *st = vgpuStubStats();
	__atomic_fetch_add(&st->launch_calls, 1, __ATOMIC_RELAXED);
	st->last_blocks = blocks;
	uint64_t dur = blocks * g->wave_ns / (uint64_t)g->dev[c->phys].sm;
	if (dur == 0)
		return CUDA_SUCCESS;
	if (stub_remote())
		return stub_remote_launch(c->phys, dur);
	struct stub_proc *p = stub_proc_rec(c->phys, vgpuStubHostPid(), 1);
	if (p == NULL)
		return CUDA_SUCCESS;
	if (g->timeslice)
		return launch_timesliced(&g->dev[c->phys], p, dur);
	pthread_mutex_lock(&mu);
	uint64_t now = vgpuStubNowNs();
	uint64_t start = p->busy_until_ns > now ? p->busy_until_ns : now;
	__atomic_store_n(&p->enq_ns, p->enq_ns + dur, __ATOMIC_RELEASE);
	__atomic_store_n(&p->busy_until_ns, start + dur, __ATOMIC_RELEASE);
	uint64_t until = start + dur;
	pthread_mutex_unlock(&mu);
	if (until > now + g->max_queue_ns)
		sleep_ns(until - now - g->max_queue_ns);
	return CUDA_SUCCESS;
}

#define GRID(x, y, z) ((uint64_t)(x) * (y) * (z))

CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e)
{
	(void)f, (void)bx, (void)by, (void)bz, (void)sh, (void)s, (void)p, (void)e;
	return launch(GRID(gx, gy, gz));
}
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			     unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e)
{
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, e);
}
CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
				   unsigned bx, unsigned by, unsigned bz, unsigned sh, CUstream s,
				   void **p)
{
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, NULL);
}
CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
					unsigned bx, unsigned by, unsigned bz, unsigned sh,
					CUstream s, void **p)
{
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, sh, s, p, NULL);
}
CUresult cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **p, void **e)
{
	(void)f, (void)p, (void)e;
	if (c == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	return launch(GRID(c->gridDimX, c->gridDimY, c->gridDimZ));
}
CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **p, void **e)
{
	return cuLaunchKernelEx(c, f, p, e);
}
CUresult cuGraphLaunch(CUgraphExec g, CUstream s)
{
	(void)s;
	/* Graph memory is backed at launch (cuda_graph.c); a graph without memory nodes has nothing to back. */
	CUresult r = g != NULL ? stub_graph_commit(g) : CUDA_SUCCESS;
	if (r != CUDA_SUCCESS && r != CUDA_ERROR_INVALID_VALUE)
		return r;
	return launch(16);
}
CUresult cuGraphLaunch_ptsz(CUgraphExec g, CUstream s) { return cuGraphLaunch(g, s); }

static CUresult sync_ctx(void)
{
	STUB_NEED_INIT();
	struct stub_ctx *c = stub_current();
	if (c == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (stub_remote()) {
		CUresult r = stub_remote_sync(c->phys);
		stub_pools_sync();
		return r;
	}
	struct stub_proc *p = stub_proc_rec(c->phys, vgpuStubHostPid(), 0);
	uint64_t now = vgpuStubNowNs();
	if (p != NULL && p->busy_until_ns > now)
		sleep_ns(p->busy_until_ns - now);
	stub_pools_sync();
	return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) { return sync_ctx(); }
CUresult cuStreamSynchronize(CUstream s) { (void)s; return sync_ctx(); }
CUresult cuStreamSynchronize_ptsz(CUstream s) { (void)s; return sync_ctx(); }

/* ---- cuGetProcAddress: variant chosen by version and flags like the driver ---- */

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
#ifndef STUB_MINIMAL
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status);
#endif

struct entry { const char *name; void *fn; int min_version; };
#define E(n, v) {#n, (void *)n, v}
static const struct entry table[] = {
	E(cuInit, 2000), E(cuDriverGetVersion, 2020), E(cuDeviceGet, 2000),
	E(cuDeviceGetCount, 2000), E(cuDeviceGetAttribute, 2000), E(cuDeviceTotalMem, 2000),
	E(cuDeviceGetUuid, 9020), E(cuDeviceGetUuid_v2, 11040), E(cuMemHostAlloc, 2020),
	E(cuMemFreeHost, 2000), E(cuMemHostGetDevicePointer_v2, 3020), E(cuCtxPushCurrent_v2, 4000),
	E(cuCtxPopCurrent_v2, 4000),
	E(cuDeviceTotalMem_v2, 3020), E(cuCtxCreate, 2000), E(cuCtxCreate_v2, 3020),
	E(cuCtxCreate_v3, 11040), E(cuCtxCreate_v4, 12050), E(cuCtxDestroy, 2000),
	E(cuCtxDestroy_v2, 4000), E(cuCtxGetCurrent, 4000), E(cuCtxSetCurrent, 4000),
	E(cuCtxGetDevice, 2000), E(cuCtxSynchronize, 2000), E(cuDevicePrimaryCtxRetain, 7000),
	E(cuDevicePrimaryCtxRelease, 7000), E(cuDevicePrimaryCtxRelease_v2, 11000),
	E(cuDevicePrimaryCtxReset, 7000), E(cuDevicePrimaryCtxReset_v2, 11000),
	E(cuMemAlloc, 2000), E(cuMemAlloc_v2, 3020), E(cuMemAllocPitch, 2000),
	E(cuMemAllocPitch_v2, 3020), E(cuMemFree, 2000), E(cuMemFree_v2, 3020),
	E(cuMemGetInfo, 2000), E(cuMemGetInfo_v2, 3020), E(cuMemAllocManaged, 6000),
	E(cuArrayCreate, 2000), E(cuArrayCreate_v2, 3020), E(cuArray3DCreate, 2000),
	E(cuArray3DCreate_v2, 3020), E(cuArrayDestroy, 2000), E(cuMipmappedArrayCreate, 5000),
	E(cuMipmappedArrayDestroy, 5000), E(cuLaunchKernel, 4000), E(cuLaunchKernel_ptsz, 7000),
	E(cuLaunchKernelEx, 11060), E(cuLaunchKernelEx_ptsz, 11060),
	E(cuLaunchCooperativeKernel, 9000), E(cuLaunchCooperativeKernel_ptsz, 9000),
	E(cuGraphLaunch, 10000), E(cuGraphLaunch_ptsz, 10000), E(cuStreamSynchronize, 2000),
	E(cuStreamSynchronize_ptsz, 7000), E(cuGetProcAddress, 11030),
#ifndef STUB_MINIMAL
	E(cuGetProcAddress_v2, 12000), E(cuMemCreate, 10020), E(cuMemRelease, 10020),
	E(cuMemRetainAllocationHandle, 11000), E(cuMemAllocAsync, 11020),
	E(cuMemAllocAsync_ptsz, 11020), E(cuMemAllocFromPoolAsync, 11020),
	E(cuMemAllocFromPoolAsync_ptsz, 11020), E(cuMemFreeAsync, 11020),
	E(cuMemFreeAsync_ptsz, 11020), E(cuMemPoolDestroy, 11020), E(cuMemPoolTrimTo, 11020),
	E(cuMemPoolGetAttribute, 11020), E(cuDeviceGetMemPool, 11020), E(cuMemMap, 10020),
	E(cuMemUnmap, 10020), E(cuMemAddressReserve, 10020), E(cuMemAddressFree, 10020),
	E(cuMemSetAccess, 10020), E(cuMemGetAllocationGranularity, 10020),
	E(cuMemExportToShareableHandle, 10020), E(cuMemImportFromShareableHandle, 10020),
	E(cuGraphInstantiate, 10000), E(cuGraphInstantiate_v2, 11000),
	E(cuGraphInstantiateWithFlags, 11040), E(cuGraphInstantiateWithParams, 12000),
	E(cuGraphInstantiateWithParams_ptsz, 12000), E(cuGraphExecDestroy, 10000),
	E(cuGraphGetNodes, 10000), E(cuGraphNodeGetType, 10000), E(cuGraphMemAllocNodeGetParams, 11040),
	E(cuStreamIsCapturing, 10000), E(cuStreamIsCapturing_ptsz, 10000),
#endif
	E(cuIpcGetMemHandle, 4010), E(cuIpcOpenMemHandle, 4010), E(cuIpcOpenMemHandle_v2, 11000),
	E(cuIpcCloseMemHandle, 4010), E(cuDeviceCanAccessPeer, 4000), E(cuCtxEnablePeerAccess, 4000),
	E(cuCtxDisablePeerAccess, 4000), E(cuMemcpyPeer, 4000), E(cuMemcpyPeerAsync, 4000),
};

/*
 * VGPU_STUB_GPA_FUTURE=1 models a driver newer than libvgpu: it knows a
 * cuMemAlloc_v3 introduced in a CUDA version libvgpu has never seen, which
 * runtimes built for that version get from cuGetProcAddress("cuMemAlloc").
 */
static const struct entry future[] = {{"cuMemAlloc_v3", (void *)cuMemAlloc_v2, 13090}};

/*
 * A name whose newest meaning is another entry point: CUDA 12's cuda.h maps
 * cuGraphInstantiate to cuGraphInstantiateWithFlags (cudaTypedefs.h:
 * PFN_cuGraphInstantiate is PFN_cuGraphInstantiateWithFlags_v11040), so a
 * runtime built for 12.0 or later asking for "cuGraphInstantiate" gets the
 * three-argument function; older runtimes get cuGraphInstantiate(_v2).
 */
#ifndef STUB_MINIMAL
static const struct { const char *symbol; const char *target; int min_version; } renamed[] = {
	{"cuGraphInstantiate", "cuGraphInstantiateWithFlags", 12000},
};
#endif

static int env_flag(const char *name)
{
	const char *v = getenv(name);
	return v != NULL && strcmp(v, "1") == 0;
}

static const struct entry *lookup(const char *name)
{
	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcmp(table[i].name, name) == 0)
			return &table[i];
	if (env_flag("VGPU_STUB_GPA_FUTURE") && strcmp(future[0].name, name) == 0)
		return &future[0];
	return NULL;
}

/* The entry point handed out: internal (cuda_internal.c) with VGPU_STUB_GPA_INTERNAL=1. */
static void *entry_point(const struct entry *e)
{
	void *internal = env_flag("VGPU_STUB_GPA_INTERNAL") ? stub_internal_entry(e->name) : NULL;
	return internal != NULL ? internal : e->fn;
}

/*
 * The rule of the CUDA Driver API reference (Driver Entry Point Access): the
 * newest variant introduced at or before cudaVersion; with
 * CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM the per-thread one when it
 * exists for that version.
 */
static CUresult resolve(const char *symbol, void **pfn, int version, cuuint64_t flags,
			CUdriverProcAddressQueryResult *status)
{
	char name[128];
	const struct entry *best = NULL;
	if (symbol == NULL || pfn == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	*pfn = NULL;
#ifndef STUB_MINIMAL
	for (size_t i = 0; best == NULL && i < sizeof(renamed) / sizeof(renamed[0]); i++)
		if (strcmp(renamed[i].symbol, symbol) == 0 && renamed[i].min_version <= version)
			best = lookup(renamed[i].target);
#endif
	if (best == NULL && (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)) {
		snprintf(name, sizeof(name), "%s_ptsz", symbol);
		best = lookup(name);
		if (best != NULL && best->min_version > version)
			best = NULL;
	}
	for (int v = 4; best == NULL && v >= 1; v--) {
		if (v == 1)
			snprintf(name, sizeof(name), "%s", symbol);
		else
			snprintf(name, sizeof(name), "%s_v%d", symbol, v);
		const struct entry *e = lookup(name);
		if (e != NULL && e->min_version <= version)
			best = e;
	}
	if (best == NULL) {
		if (status)
			*status = lookup(symbol) ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
						 : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
		return CUDA_ERROR_NOT_FOUND;
	}
	if (status)
		*status = CU_GET_PROC_ADDRESS_SUCCESS;
	*pfn = entry_point(best);
	return CUDA_SUCCESS;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
	return resolve(symbol, pfn, cudaVersion, flags, NULL);
}

#ifndef STUB_MINIMAL
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
			     CUdriverProcAddressQueryResult *status)
{
	return resolve(symbol, pfn, cudaVersion, flags, status);
}
#endif
