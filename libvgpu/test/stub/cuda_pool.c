/*
 * cuda_pool.c - stub stream-ordered allocator. A pool grows its reserve in
 * steps, keeps freed memory reserved, and releases the part above its
 * release threshold on synchronisation or cuMemPoolTrimTo, like the driver.
 * The step is 2 MiB, the minimum device memory granularity; the CUDA
 * documentation leaves how far a pool grows to the driver, and
 * VGPU_STUB_POOL_STEP models one that grows in bigger chunks.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "remote_int.h"
#include "stub_int.h"

#ifndef STUB_MINIMAL
struct stub_pool {
	int phys;
	int alive;
	uint64_t reserved, used, threshold;
	int handle_types;       /* CUmemPoolProps.handleTypes at cuMemPoolCreate */
	int imported;           /* cuMemPoolImportFromShareableHandle: no memory of its own */
	int destroyed;          /* destroyed with allocations outstanding */
};

#define MAXP 64
static struct stub_pool pools[MAXP];    /* [0..STUB_MAX_DEV) are the default pools */
static struct stub_pool *current_pool[STUB_MAX_DEV];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
struct rec { uint64_t ptr, size; struct stub_pool *pool; uint64_t xid; int imported; };
static struct rec recs[8192];
static uint64_t next_ptr = UINT64_C(0x7e0000000000);

static uint64_t step(void)
{
	const char *v = getenv("VGPU_STUB_POOL_STEP");
	uint64_t st = v != NULL && *v ? strtoull(v, NULL, 0) : 0;
	return st != 0 && (st & (st - 1)) == 0 ? st : 2u << 20;
}

static uint64_t round_step(uint64_t v)
{
	uint64_t st = step();
	return v > UINT64_MAX - st ? UINT64_MAX : (v + st - 1) & ~(st - 1);
}

static struct stub_pool *default_pool(int phys)
{
	struct stub_pool *p = &pools[phys];
	p->phys = phys;
	p->alive = 1;
	return current_pool[phys] ? current_pool[phys] : p;
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev)
{
	STUB_NEED_INIT();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pools[phys].phys = phys;
	pools[phys].alive = 1;
	*pool = (CUmemoryPool)&pools[phys];
	return CUDA_SUCCESS;
}

CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev)
{
	STUB_NEED_INIT();
	int phys = stub_phys(dev);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*pool = (CUmemoryPool)default_pool(phys);
	return CUDA_SUCCESS;
}

/* CUmemPoolProps: only location (offset 8) is read. */
CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props)
{
	STUB_NEED_INIT();
	const CUmemLocation *loc = (const CUmemLocation *)((const char *)props + 8);
	int htypes;
	memcpy(&htypes, (const char *)props + 4, sizeof(htypes));   /* CUmemPoolProps.handleTypes */
	int phys = stub_phys(loc->id);
	if (phys < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&mu);
	for (int i = STUB_MAX_DEV; i < MAXP; i++)
		if (!pools[i].alive && !pools[i].destroyed) {
			pools[i] = (struct stub_pool){phys, 1, 0, 0, 0, htypes, 0, 0};
			*pool = (CUmemoryPool)&pools[i];
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

static void shrink_locked(struct stub_pool *p, uint64_t keep)
{
	uint64_t target = p->used > keep ? p->used : keep;
	target = round_step(target);
	if (p->reserved > target) {
		stub_dev_release(p->phys, p->reserved - target);
		p->reserved = target;
	}
}

CUresult cuMemPoolDestroy(CUmemoryPool pool)
{
	struct stub_pool *p = (struct stub_pool *)pool;
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	shrink_locked(p, 0);
	/*
	 * "If any pointers obtained from this pool haven't been freed ... the
	 * function will return immediately and the resources associated with
	 * the pool will be released automatically once there are no more
	 * outstanding allocations" (cuMemPoolDestroy): pool_free finishes it.
	 */
	if (p >= &pools[STUB_MAX_DEV]) {
		p->alive = 0;
		p->destroyed = p->used != 0;
	}
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t keep)
{
	pthread_mutex_lock(&mu);
	shrink_locked((struct stub_pool *)pool, keep);
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value)
{
	struct stub_pool *p = (struct stub_pool *)pool;
	uint64_t v;
	pthread_mutex_lock(&mu);
	if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT)
		v = p->reserved;
	else if (attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT)
		v = p->used;
	else if (attr == CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
		v = p->threshold;
	else {
		pthread_mutex_unlock(&mu);
		return CUDA_ERROR_INVALID_VALUE;
	}
	pthread_mutex_unlock(&mu);
	memcpy(value, &v, sizeof(v));
	return CUDA_SUCCESS;
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value)
{
	if (attr != CU_MEMPOOL_ATTR_RELEASE_THRESHOLD)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(&((struct stub_pool *)pool)->threshold, value, sizeof(uint64_t));
	return CUDA_SUCCESS;
}

static CUresult pool_alloc(CUdeviceptr *dptr, size_t size, struct stub_pool *p)
{
	__atomic_fetch_add(&vgpuStubStats()->alloc_calls, 1, __ATOMIC_RELAXED);
	if (size == 0 || dptr == NULL || p->imported)
		return CUDA_ERROR_INVALID_VALUE;    /* imported pools do not allocate (cuMemPoolImportFromShareableHandle) */
	pthread_mutex_lock(&mu);
	uint64_t spare = p->reserved - p->used;
	if (spare < size) {
		uint64_t grow = round_step(size - spare);
		CUresult r = stub_dev_charge(p->phys, grow);
		if (r != CUDA_SUCCESS) {
			pthread_mutex_unlock(&mu);
			return r;
		}
		p->reserved += grow;
	}
	p->used += size;
	for (int i = 0; i < 8192; i++)
		if (recs[i].pool == NULL) {
			recs[i] = (struct rec){next_ptr, size, p, 0, 0};
			*dptr = next_ptr;
			next_ptr += (size + 0xfff) & ~UINT64_C(0xfff);
			break;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_SUCCESS;
}

static CUresult current_pool_alloc(CUdeviceptr *dptr, size_t size, CUstream st)
{
	STUB_NEED_INIT();
	struct stub_ctx *c = stub_current();
	if (c == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	/* Captured: an allocation node of the graph, no pool memory (cuda_graph.c). */
	if (stub_capturing(st))
		return size == 0 ? CUDA_ERROR_INVALID_VALUE : stub_capture_alloc(st, dptr, size, c->phys);
	return pool_alloc(dptr, size, default_pool(c->phys));
}

CUresult cuMemAllocAsync(CUdeviceptr *d, size_t s, CUstream st) { return current_pool_alloc(d, s, st); }
CUresult cuMemAllocAsync_ptsz(CUdeviceptr *d, size_t s, CUstream st) { return current_pool_alloc(d, s, st); }
CUresult cuMemAllocFromPoolAsync(CUdeviceptr *d, size_t s, CUmemoryPool p, CUstream st)
{
	STUB_NEED_INIT();
	if (stub_capturing(st))
		return s == 0 ? CUDA_ERROR_INVALID_VALUE : stub_capture_alloc(st, d, s, ((struct stub_pool *)p)->phys);
	return pool_alloc(d, s, (struct stub_pool *)p);
}
CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *d, size_t s, CUmemoryPool p, CUstream st)
{
	return cuMemAllocFromPoolAsync(d, s, p, st);
}

/*
 * Returns an allocation to its pool at once. cuMemFreeAsync's free is
 * ordered on its stream, which the stub runs to completion at once; so is
 * cuMemFree's of stream-ordered memory, which the CUDA Driver API reference
 * (cuMemFree) allows: "This API will not perform any implicit
 * synchronization when the pointer was allocated with cuMemAllocAsync or
 * cuMemAllocFromPoolAsync. Callers must ensure that all accesses to these
 * pointer have completed before invoking cuMemFree."
 */
CUresult stub_pool_free_plain(CUdeviceptr dptr)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 8192; i++)
		if (recs[i].pool != NULL && recs[i].ptr == dptr) {
			struct stub_pool *p = recs[i].pool;
			uint64_t xid = recs[i].xid;
			int imported = recs[i].imported;
			recs[i].pool = NULL;
			if (!imported) {
				p->used -= recs[i].size;
				if (p->destroyed && p->used == 0) {
					shrink_locked(p, 0);    /* the last outstanding allocation of a destroyed pool */
					p->destroyed = 0;
				}
			}
			pthread_mutex_unlock(&mu);
			if (imported)
				stub_xmem_put(xid);
			else if (xid != 0)
				stub_xmem_unshare(xid);     /* back in the pool: still ours */
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	/* An allocation a graph made and did not free (cuda_graph.c). */
	return stub_graph_free(dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult free_async(CUdeviceptr d, CUstream st)
{
	if (stub_capturing(st))
		return stub_capture_free(st, d);
	__atomic_fetch_add(&vgpuStubStats()->free_calls, 1, __ATOMIC_RELAXED);
	return stub_pool_free_plain(d);
}

CUresult cuMemFreeAsync(CUdeviceptr d, CUstream st) { return free_async(d, st); }
CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream st) { return free_async(d, st); }

/*
 * Pools shared between processes (CUDA Driver API reference, "Stream Ordered
 * Memory Allocator": cuMemPoolExportToShareableHandle,
 * cuMemPoolImportFromShareableHandle, cuMemPoolExportPointer,
 * cuMemPoolImportPointer). A pool created with a shareable handle type is
 * exported as a POSIX descriptor (a memfd naming its device here); the
 * importer's pool has no memory of its own and may not allocate; each
 * allocation is exported as 64 bytes of data, and imported as a pointer to
 * the exporter's memory, which the importer frees (cuMemFreeAsync) before
 * the exporter may. The memory is the exporter's pool's reserve: importing
 * adds nothing on the device. In remote mode the descriptor names the
 * daemon's card (a container's indices are its own) and the allocation is
 * an export of the daemon's (e2e/fakedriver/PROTOCOL.md, "Shared memory"):
 * EXPORT, IMPORT, UNIMPORT at the importer's free, UNSHARE at the
 * exporter's, since its memory goes back into its pool.
 */
#define POOLPTR_MAGIC UINT64_C(0x5354554250505452)

CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool, int handleType,
					  unsigned long long flags)
{
	struct stub_pool *p = (struct stub_pool *)pool;
	STUB_NEED_INIT();
	if (handle_out == NULL || p == NULL || flags != 0 || p->imported ||
	    handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR || (p->handle_types & handleType) == 0)
		return CUDA_ERROR_INVALID_VALUE;
	int fd = memfd_create("stub-pool-handle", MFD_CLOEXEC);
	int32_t phys = stub_remote() ? remote_daemon_dev(p->phys) : p->phys;
	if (fd < 0 || pwrite(fd, &phys, sizeof(phys), 0) != (ssize_t)sizeof(phys)) {
		if (fd >= 0)
			close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*(int *)handle_out = fd;
	return CUDA_SUCCESS;
}

CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle, int handleType,
					    unsigned long long flags)
{
	int32_t phys = -1;
	STUB_NEED_INIT();
	if (pool_out == NULL || flags != 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR ||
	    pread((int)(intptr_t)handle, &phys, sizeof(phys), 0) != (ssize_t)sizeof(phys))
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_remote() && phys >= 0)
		phys = remote_phys_of((uint64_t)phys);  /* -1: a card this process does not see */
	if (phys < 0 || phys >= STUB_MAX_DEV)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	for (int i = STUB_MAX_DEV; i < MAXP; i++)
		if (!pools[i].alive && !pools[i].destroyed) {
			pools[i] = (struct stub_pool){phys, 1, 0, 0, 0, handleType, 1, 0};
			*pool_out = (CUmemoryPool)&pools[i];
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr)
{
	STUB_NEED_INIT();
	if (shareData_out == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t xid = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 8192; i++)
		if (recs[i].pool != NULL && recs[i].ptr == ptr && !recs[i].imported &&
		    recs[i].pool->handle_types != 0) {
			if (recs[i].xid == 0)
				recs[i].xid = stub_xmem_new(recs[i].pool->phys, recs[i].size);
			xid = recs[i].xid;
			break;
		}
	pthread_mutex_unlock(&mu);
	if (xid == 0)
		return CUDA_ERROR_INVALID_VALUE;
	uint64_t words[2] = {POOLPTR_MAGIC, xid};
	memset(shareData_out, 0, sizeof(*shareData_out));
	memcpy(shareData_out->reserved, words, sizeof(words));
	return CUDA_SUCCESS;
}

CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData)
{
	struct stub_pool *p = (struct stub_pool *)pool;
	uint64_t words[2], size;
	int phys;
	STUB_NEED_INIT();
	if (ptr_out == NULL || shareData == NULL || p == NULL || !p->imported)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(words, shareData->reserved, sizeof(words));
	if (words[0] != POOLPTR_MAGIC || stub_xmem_get(words[1], &phys, &size) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < 8192; i++)
		if (recs[i].pool == NULL) {
			recs[i] = (struct rec){next_ptr, size, p, words[1], 1};
			*ptr_out = next_ptr;
			next_ptr += (size + 0xfff) & ~UINT64_C(0xfff);
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	stub_xmem_put(words[1]);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

void stub_pools_sync(void)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAXP; i++)
		if (pools[i].alive)
			shrink_locked(&pools[i], pools[i].threshold);
	pthread_mutex_unlock(&mu);
}
#else
void stub_pools_sync(void) {}
CUresult stub_pool_free_plain(CUdeviceptr dptr)
{
	return stub_graph_free(dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}
#endif
