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
 * driver.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "stub_int.h"

#define MAX_HOST 4096
#define DEVICE_VIEW_OFFSET UINT64_C(0x100000000000)   /* device pointer = host + this */

struct host_alloc { void *p; size_t size; unsigned int flags; };
static struct host_alloc hosts[MAX_HOST];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
	STUB_NEED_INIT();
	if (pp == NULL || bytesize == 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (stub_current() == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	/* Host memory is not touched by the stub's kernels: reserve address space only. */
	void *p = malloc(1);
	if (p == NULL)
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_HOST; i++)
		if (hosts[i].p == NULL) {
			hosts[i] = (struct host_alloc){p, bytesize, flags};
			__atomic_fetch_add(&vgpuStubStats()->host_bytes, bytesize, __ATOMIC_RELAXED);
			pthread_mutex_unlock(&mu);
			*pp = p;
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	free(p);
	return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p)
{
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_HOST; i++)
		if (hosts[i].p == p && p != NULL) {
			__atomic_fetch_sub(&vgpuStubStats()->host_bytes, hosts[i].size, __ATOMIC_RELAXED);
			hosts[i].p = NULL;
			pthread_mutex_unlock(&mu);
			free(p);
			return CUDA_SUCCESS;
		}
	pthread_mutex_unlock(&mu);
	return CUDA_ERROR_INVALID_VALUE;
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
