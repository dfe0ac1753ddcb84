/*
 * pool.c - stream-ordered allocations (cuMemAllocAsync, cuMemAllocFromPoolAsync,
 * cuMemFreeAsync) and memory pools.
 *
 * A pool keeps freed memory reserved for reuse, so what a pool occupies on
 * the device is its RESERVED_MEM_CURRENT, not the sum of live allocations.
 * For every pool seen, the region is charged exactly that reserved size:
 *  - before an allocation the pool cannot serve from its free reserve, the
 *    request is charged (and refused if it would pass the limit);
 *  - after each pool operation the charge is re-synchronised with the pool;
 *  - when any allocation would pass the limit, memory.c asks this file to trim
 *    the device's pools (cuMemPoolTrimTo 0) and re-synchronise, so memory a
 *    pool merely caches never causes a false out-of-memory.
 * If the driver cannot report pool attributes, live allocations are counted.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <string.h>

#include "hooks.h"

#define MAX_POOLS 64

struct pool_rec {
	CUmemoryPool pool;
	int idx;
	uint64_t charged;   /* bytes currently charged to the region for this pool */
	uint32_t live;      /* its allocations this process made and has not freed */
	bool destroyed;     /* cuMemPoolDestroy'ed while `live`: charged until the last is freed */
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct pool_rec pools[MAX_POOLS];
static int npools;

static int pool_attr(CUmemoryPool pool, int attr, uint64_t *value)
{
	cuuint64_t v = 0;
	if (REAL(cuMemPoolGetAttribute) == NULL ||
	    REAL(cuMemPoolGetAttribute)(pool, attr, &v) != CUDA_SUCCESS)
		return -1;
	*value = v;
	return 0;
}

static void adjust_charged(CUmemoryPool pool, int64_t delta);

static struct pool_rec *find_locked(CUmemoryPool pool)
{
	for (int i = 0; i < npools; i++)
		if (pools[i].pool == pool)
			return &pools[i];
	return NULL;
}

/*
 * Moves the difference between the pool's reserve and its charge to the
 * region. With `enforce`, growth is charged like an allocation and may be
 * refused (-1: over the limit, nothing charged); otherwise it is recorded as
 * it is, since the memory is already in use (a shrink always is).
 */
static int resync_mode(CUmemoryPool pool, bool enforce)
{
	uint64_t reserved;
	if (pool_attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) != 0)
		return 0;
	if (reserved > VGPU_MAX_ALLOC)
		reserved = VGPU_MAX_ALLOC;      /* garbage from the driver must not wreck the totals */
	pthread_mutex_lock(&mu);
	struct pool_rec *rec = find_locked(pool);
	int64_t delta = 0;
	int idx = -1;
	if (rec != NULL) {
		delta = (int64_t)reserved - (int64_t)rec->charged;
		rec->charged = reserved;
		idx = rec->idx;
	}
	pthread_mutex_unlock(&mu);
	if (delta > 0 && enforce && vgpu_charge(idx, (uint64_t)delta) != CUDA_SUCCESS) {
		adjust_charged(pool, -delta);
		return -1;
	}
	if (delta != 0 && !(delta > 0 && enforce))
		vgpu_region_force(idx, delta);
	return 0;
}

static void resync(CUmemoryPool pool) { (void)resync_mode(pool, false); }

/*
 * Counts one allocation of the pool in or out. When the last one of a pool
 * destroyed meanwhile goes, the pool is gone: returns its charge (and forgets
 * it) for the caller to give back; else 0.
 */
static uint64_t live_adjust(CUmemoryPool pool, int delta, int *idx, bool *destroyed)
{
	uint64_t gone = 0;
	*destroyed = false;
	pthread_mutex_lock(&mu);
	struct pool_rec *rec = find_locked(pool);
	if (rec != NULL) {
		*destroyed = rec->destroyed;
		rec->live = (uint32_t)((int64_t)rec->live + delta);
		if (rec->destroyed && rec->live == 0) {
			gone = rec->charged;
			*idx = rec->idx;
			*rec = pools[--npools];
		}
	}
	pthread_mutex_unlock(&mu);
	return gone;
}

/* Starts tracking a pool; returns false when the table is full. */
static bool track(CUmemoryPool pool, int idx)
{
	bool fresh = false, ok = true;
	pthread_mutex_lock(&mu);
	if (find_locked(pool) == NULL) {
		if (npools < MAX_POOLS) {
			pools[npools++] = (struct pool_rec){pool, idx, 0, 0, false};
			fresh = true;
		} else {
			ok = false;
		}
	}
	pthread_mutex_unlock(&mu);
	if (fresh)
		resync(pool);
	return ok;
}

static void adjust_charged(CUmemoryPool pool, int64_t delta)
{
	pthread_mutex_lock(&mu);
	struct pool_rec *rec = find_locked(pool);
	if (rec != NULL) {
		if (delta < 0 && (uint64_t)(-delta) > rec->charged)
			rec->charged = 0;
		else
			rec->charged = (uint64_t)((int64_t)rec->charged + delta);
	}
	pthread_mutex_unlock(&mu);
}

enum async_fn { A_ALLOC, A_ALLOC_PTSZ, A_POOL, A_POOL_PTSZ };

static CUresult call_alloc(enum async_fn fn, CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
			   CUstream stream)
{
	switch (fn) {
	case A_ALLOC: return REAL(cuMemAllocAsync)(dptr, size, stream);
	case A_ALLOC_PTSZ: return REAL(cuMemAllocAsync_ptsz)(dptr, size, stream);
	case A_POOL: return REAL(cuMemAllocFromPoolAsync)(dptr, size, pool, stream);
	default: return REAL(cuMemAllocFromPoolAsync_ptsz)(dptr, size, pool, stream);
	}
}

static CUresult call_free(enum async_fn fn, CUdeviceptr dptr, CUstream stream)
{
	if (fn == A_ALLOC_PTSZ || fn == A_POOL_PTSZ)
		return REAL(cuMemFreeAsync_ptsz)(dptr, stream);
	return REAL(cuMemFreeAsync)(dptr, stream);
}

/*
 * Device memory granularity (cuMemGetAllocationGranularity, minimum) of the
 * device: a pool grows its reserve in whole granules, so growth is charged
 * rounded up to one before the driver is asked. 2 MiB when unknown.
 */
static uint64_t granule(CUdevice dev)
{
	size_t g = 0;
	CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
				    .location = {CU_MEM_LOCATION_TYPE_DEVICE, dev}};
	if (REAL(cuMemGetAllocationGranularity) == NULL ||
	    REAL(cuMemGetAllocationGranularity)(&g, &prop, 0) != CUDA_SUCCESS || g == 0 ||
	    (g & (g - 1)) != 0)
		g = 2u << 20;
	return g;
}

/* What an allocation of `size` may add to the pool's reserve, in granules. */
static uint64_t growth(uint64_t size, uint64_t reserved, uint64_t used, uint64_t g)
{
	uint64_t spare = reserved >= used ? reserved - used : 0;
	if (spare >= size)
		return 0;
	uint64_t need = size - spare;
	return need > UINT64_MAX - (g - 1) ? UINT64_MAX : (need + g - 1) & ~(g - 1);
}

/* The allocation made the pool grow past the limit: undo it and refuse. */
static CUresult roll_back(enum async_fn fn, CUmemoryPool p, CUdeviceptr dptr, CUstream stream,
			  int idx, uint64_t size)
{
	call_free(fn, dptr, stream);
	if (REAL(cuMemPoolTrimTo) != NULL)
		REAL(cuMemPoolTrimTo)(p, 0);
	resync(p);      /* what the pool still reserves until the stream reaches the free */
	VGPU_LOG(VGPU_LOG_INFO, "device %d: the pool grew past the limit for %llu bytes; refused",
		 idx, (unsigned long long)size);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static CUresult async_alloc(enum async_fn fn, CUdeviceptr *dptr, size_t size, CUmemoryPool pool,
			    CUstream stream)
{
	CUdevice dev;
	int idx;
	if (!vgpu_counting() || vgpu_current_dev(&dev, &idx) != 0)
		return call_alloc(fn, dptr, size, pool, stream);
	/*
	 * On a capturing stream nothing is allocated: the driver adds an
	 * allocation node to the graph, which owns it (cuMemAllocAsync), and it
	 * is charged with the graph's (graph.c). Its captured free is not in
	 * the ledger either, so it passes through too.
	 */
	if (vgpu_stream_capturing(stream, fn == A_ALLOC_PTSZ || fn == A_POOL_PTSZ))
		return call_alloc(fn, dptr, size, pool, stream);
	if (size > VGPU_MAX_ALLOC)
		return vgpu_charge(idx, size);  /* refused, never reaches the totals */

	CUmemoryPool p = pool;
	if (p == NULL && REAL(cuDeviceGetMemPool) != NULL &&
	    REAL(cuDeviceGetMemPool)(&p, dev) != CUDA_SUCCESS)
		p = NULL;
	uint64_t reserved = 0, used = 0;
	bool tracked = p != NULL &&
		       pool_attr(p, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved) == 0 &&
		       pool_attr(p, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == 0 && track(p, idx);
	/* Served from the pool's free reserve: no new device memory. */
	uint64_t need = tracked ? growth(size, reserved, used, granule(dev)) : size;
	if (need != 0) {
		CUresult res = vgpu_charge(idx, need);
		if (res != CUDA_SUCCESS)
			return res;
		if (tracked)
			adjust_charged(p, (int64_t)need);
	}
	CUresult res = call_alloc(fn, dptr, size, pool, stream);
	if (res != CUDA_SUCCESS) {
		if (need != 0) {
			vgpu_uncharge(idx, need);
			if (tracked)
				adjust_charged(p, -(int64_t)need);
		}
		return res;
	}
	/* Growth beyond the granules charged (a driver growing in bigger steps) must fit too. */
	if (tracked && resync_mode(p, true) != 0)
		return roll_back(fn, p, dptr ? *dptr : 0, stream, idx, size);
	struct vgpu_entry e = {.key = dptr ? *dptr : 0, .bytes = size, .owner = tracked ? p : NULL,
			       .idx = idx, .kind = VGPU_K_ASYNC, .refs = 1};
	vgpu_ledger_add(&e);
	bool destroyed;
	if (tracked)
		(void)live_adjust(p, +1, &idx, &destroyed);
	return res;
}

/* The ledger's side of a stream-ordered allocation's free, which the driver answered `res`. */
static void async_settle(const struct vgpu_entry *ep, CUresult res)
{
	struct vgpu_entry e = *ep;
	int idx = -1;
	bool destroyed;
	if (res != CUDA_SUCCESS) {
		vgpu_ledger_add(&e);
	} else if (e.owner == NULL) {
		vgpu_uncharge(e.idx, e.bytes);
	} else {
		uint64_t gone = live_adjust((CUmemoryPool)e.owner, -1, &idx, &destroyed);
		if (gone != 0)
			vgpu_uncharge(idx, gone);       /* the destroyed pool's last allocation */
		else if (!destroyed)
			resync((CUmemoryPool)e.owner);  /* a destroyed pool cannot be asked */
	}
}

static CUresult async_free(bool ptsz, CUdeviceptr dptr, CUstream stream)
{
	struct vgpu_entry e;
	bool had = vgpu_forget(VGPU_K_ASYNC, dptr, &e);
	CUresult res = ptsz ? REAL(cuMemFreeAsync_ptsz)(dptr, stream)
			    : REAL(cuMemFreeAsync)(dptr, stream);
	if (had)
		async_settle(&e, res);
	return res;
}

/*
 * cuMemFree_v2 of stream-ordered memory: the CUDA Driver API reference
 * (cuMemFree) accepts pointers from cuMemAllocAsync and
 * cuMemAllocFromPoolAsync, freed without implicit synchronization. The
 * allocation leaves its pool as with cuMemFreeAsync, so it is settled the
 * same way; left in the ledger it would keep its pool's count of live
 * allocations up, and a pool destroyed meanwhile charged forever. Returns
 * false, calling nothing, when dptr is no stream-ordered allocation of this
 * process. (cuMemFree, the CUDA 2.0 variant with 32-bit pointers, which no
 * runtime with stream-ordered allocation calls, is left as it is.)
 */
bool vgpu_pool_free_plain(CUdeviceptr dptr, CUresult *res)
{
	struct vgpu_entry e;
	if (!vgpu_forget(VGPU_K_ASYNC, dptr, &e))
		return false;
	*res = REAL(cuMemFree_v2)(dptr);
	async_settle(&e, *res);
	return true;
}

VGPU_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	VGPU_ENTER_CUDA(cuMemAllocAsync);
	return async_alloc(A_ALLOC, dptr, bytesize, NULL, hStream);
}

VGPU_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	VGPU_ENTER_CUDA(cuMemAllocAsync_ptsz);
	return async_alloc(A_ALLOC_PTSZ, dptr, bytesize, NULL, hStream);
}

VGPU_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize,
					     CUmemoryPool pool, CUstream hStream)
{
	VGPU_ENTER_CUDA(cuMemAllocFromPoolAsync);
	return async_alloc(A_POOL, dptr, bytesize, pool, hStream);
}

VGPU_EXPORT CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
						  CUmemoryPool pool, CUstream hStream)
{
	VGPU_ENTER_CUDA(cuMemAllocFromPoolAsync_ptsz);
	return async_alloc(A_POOL_PTSZ, dptr, bytesize, pool, hStream);
}

VGPU_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	VGPU_ENTER_CUDA(cuMemFreeAsync);
	return async_free(false, dptr, hStream);
}

VGPU_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	VGPU_ENTER_CUDA(cuMemFreeAsync_ptsz);
	return async_free(true, dptr, hStream);
}

/*
 * cuMemPoolDestroy: "If any pointers obtained from this pool haven't been
 * freed ... the function will return immediately and the resources
 * associated with the pool will be released automatically once there are no
 * more outstanding allocations" (CUDA Driver API reference). So a pool
 * destroyed with allocations outstanding stays charged for what they use
 * (its free reserve is released now: the charge drops to the used size,
 * rounded up to 2 MiB, the usual device granule) until the last of them is freed.
 */
VGPU_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	uint64_t used = 0;
	VGPU_ENTER_CUDA(cuMemPoolDestroy);
	bool known = pool_attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used) == 0;
	CUresult res = REAL(cuMemPoolDestroy)(pool);
	if (res != CUDA_SUCCESS)
		return res;
	int idx = -1;
	uint64_t release = 0;
	pthread_mutex_lock(&mu);
	struct pool_rec *rec = find_locked(pool);
	if (rec != NULL) {
		idx = rec->idx;
		if (rec->live > 0 && known && used > 0) {
			uint64_t g = UINT64_C(2) << 20, keep = used > UINT64_MAX - g ? used : (used + g - 1) & ~(g - 1);
			keep = keep < rec->charged ? keep : rec->charged;
			release = rec->charged - keep;
			rec->charged = keep;
			rec->destroyed = true;
		} else {
			release = rec->charged;
			*rec = pools[--npools];
		}
	}
	pthread_mutex_unlock(&mu);
	if (release != 0)
		vgpu_uncharge(idx, release);
	return res;
}

static int pools_of(int idx, CUmemoryPool out[MAX_POOLS])
{
	int n = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < npools; i++)
		if (pools[i].idx == idx && !pools[i].destroyed)
			out[n++] = pools[i].pool;
	pthread_mutex_unlock(&mu);
	return n;
}

void vgpu_pool_trim_device(int idx)
{
	CUmemoryPool list[MAX_POOLS];
	int n = pools_of(idx, list);
	for (int i = 0; i < n; i++) {
		if (REAL(cuMemPoolTrimTo) != NULL)
			REAL(cuMemPoolTrimTo)(list[i], 0);
		resync(list[i]);
	}
}

void vgpu_pool_sync_device(int idx)
{
	CUmemoryPool list[MAX_POOLS];
	int n = pools_of(idx, list);
	for (int i = 0; i < n; i++)
		resync(list[i]);
}

void vgpu_pool_reset(void)
{
	pthread_mutex_init(&mu, NULL);
	npools = 0;
}
