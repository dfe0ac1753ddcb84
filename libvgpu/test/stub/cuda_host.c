/*
 * cuda_host.c - stub page-locked host memory mapped for the device.
 *
 * As the CUDA Driver API reference describes cuMemHostAlloc: the memory is
 * host memory (it takes nothing from the device), CU_MEMHOSTALLOC_DEVICEMAP
 * maps it into the device's address space, and cuMemHostGetDevicePointer
 * returns the device pointer of such a mapping, which "may or may not match
 * the original host pointer": the stub hands out a different one, so code
 * that assumes equality is caught. cuMemFreeHost frees by host pointer;
 * cuMemFree on the device pointer of host memory is an error, as on a real
 * driver. The memory belongs to the context that allocated it: cuCtxDestroy
 * "destroys and cleans up all resources associated with the context ...
 * memory allocations by cuMemAlloc(), cuMemAllocHost() ..." (cuCtxDestroy in
 * the reference), and cuMemAllocHost's memory is this memory, so destroying
 * or resetting that context frees it (stub_host_free_owned).
 *
 * In remote mode the fake driver daemon records what is mapped for a device
 * (HOSTALLOC and HOSTFREE, e2e/fakedriver/PROTOCOL.md, "Pinned host
 * memory"), outside the device's memory, so the tests can bound a
 * container's device plus host memory by the driver's figures.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "remote_int.h"
#include "stub_int.h"

#define MAX_HOST 4096
#define DEVICE_VIEW_OFFSET UINT64_C(0x100000000000)   /* device pointer = host + this */

/* phys: the device the memory is mapped for in the daemon's books (remote mode), -1 if none. */
struct host_alloc { void *p; size_t size; unsigned int flags; struct stub_ctx *owner; int phys; };
static struct host_alloc hosts[MAX_HOST];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

/* Tells the daemon that `bytes` are (delta > 0) or no longer are mapped for phys. */
static CUresult remote_host(int phys, size_t bytes, int delta)
{
	if (phys < 0)
		return CUDA_SUCCESS;
	int rc = remote_numbers(NULL, 0, "%s %d %llu", delta > 0 ? "HOSTALLOC" : "HOSTFREE",
				remote_daemon_dev(phys), (unsigned long long)bytes);
	return rc == ANS_OK ? CUDA_SUCCESS : rc == ANS_OOM ? CUDA_ERROR_OUT_OF_MEMORY : STUB_CUDA_ERROR_UNKNOWN;
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
	STUB_NEED_INIT();
	if (pp == NULL || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	struct stub_ctx *c = stub_current();
	if (c == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	int phys = stub_remote() && (flags & CU_MEMHOSTALLOC_DEVICEMAP) ? c->phys : -1;
	CUresult r = remote_host(phys, bytesize, +1);
	if (r != CUDA_SUCCESS)
		return r;
	/* Host memory is not touched by the stub's kernels: reserve address space only. */
	void *p = malloc(1);
	pthread_mutex_lock(&mu);
	for (int i = 0; p != NULL && i < MAX_HOST; i++)
		if (hosts[i].p == NULL) {
			hosts[i] = (struct host_alloc){p, bytesize, flags, c, phys};
			__atomic_fetch_add(&vgpuStubStats()->host_bytes, bytesize, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&mu);
			*pp = p;
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	free(p);
	remote_host(phys, bytesize, -1);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

/* Frees slot i; called with mu held, which it releases. */
static void host_release_unlock(int i)
{
	struct host_alloc h = hosts[i];
	hosts[i].p = NULL;
	__atomic_fetch_sub(&vgpuStubStats()->host_bytes, h.size, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&mu);
	free(h.p);
	remote_host(h.phys, h.size, -1);
}

CUresult cuMemFreeHost(void *p)
{
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_HOST; i++)
		if (hosts[i].p == p && p != NULL) {
			host_release_unlock(i);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}

void stub_host_free_owned(struct stub_ctx *ctx)
{
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_HOST; i++)
		if (hosts[i].p != NULL && hosts[i].owner == ctx) {
			host_release_unlock(i);
			pthread_mutex_lock(&mu);
		}
	pthread_mutex_unlock(&mu);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags)
{
	STUB_NEED_INIT();
	if (pdptr == NULL || flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_HOST; i++)
		if (hosts[i].p == p && p != NULL) {
			unsigned int f = hosts[i].flags;
			pthread_mutex_unlock(&mu);
			if (!(f & CU_MEMHOSTALLOC_DEVICEMAP))
				return CUDA_ERROR_INVALID_VALUE;
			*pdptr = (CUdeviceptr)(uintptr_t)p + DEVICE_VIEW_OFFSET;
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
}
