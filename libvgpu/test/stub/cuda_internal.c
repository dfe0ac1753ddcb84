/*
 * cuda_internal.c - the stub driver's internal entry points.
 *
 * The CUDA Driver API reference says of cuGetProcAddress only that it
 * "returns in **pfn the address of the CUDA driver function for the requested
 * CUDA version and flags"; nothing makes that the address of the exported
 * symbol of the same name, and a real libcuda is free to hand out its
 * internal dispatch entries instead. With VGPU_STUB_GPA_INTERNAL=1 the stub's
 * cuGetProcAddress does exactly that: it returns these functions, which
 * behave like the exported ones but live at other addresses, so an
 * interposer that recognises entry points by address lets calls through
 * unlimited. Only entry points that libvgpu hooks are listed: for the others
 * the address makes no difference to it.
 */
#define _GNU_SOURCE
#include <string.h>

#include "stub_int.h"

#define FWD(name, params, args)                                                \
	static CUresult internal_##name params { return name args; }

FWD(cuInit, (unsigned int f), (f))
FWD(cuMemAlloc, (CUdeviceptr_v1 *p, unsigned int n), (p, n))
FWD(cuMemAlloc_v2, (CUdeviceptr *p, size_t n), (p, n))
FWD(cuMemAllocPitch, (CUdeviceptr_v1 *p, unsigned int *pt, unsigned int w, unsigned int h,
		      unsigned int e), (p, pt, w, h, e))
FWD(cuMemAllocPitch_v2, (CUdeviceptr *p, size_t *pt, size_t w, size_t h, unsigned int e),
    (p, pt, w, h, e))
FWD(cuMemAllocManaged, (CUdeviceptr *p, size_t n, unsigned int f), (p, n, f))
FWD(cuMemFree, (CUdeviceptr_v1 p), (p))
FWD(cuMemFree_v2, (CUdeviceptr p), (p))
FWD(cuMemGetInfo, (unsigned int *f, unsigned int *t), (f, t))
FWD(cuMemGetInfo_v2, (size_t *f, size_t *t), (f, t))
FWD(cuDeviceTotalMem, (unsigned int *b, CUdevice d), (b, d))
FWD(cuDeviceTotalMem_v2, (size_t *b, CUdevice d), (b, d))
FWD(cuArrayCreate, (CUarray *a, const CUDA_ARRAY_DESCRIPTOR_v1 *d), (a, d))
FWD(cuArrayCreate_v2, (CUarray *a, const CUDA_ARRAY_DESCRIPTOR *d), (a, d))
FWD(cuArray3DCreate, (CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR_v1 *d), (a, d))
FWD(cuArray3DCreate_v2, (CUarray *a, const CUDA_ARRAY3D_DESCRIPTOR *d), (a, d))
FWD(cuArrayDestroy, (CUarray a), (a))
FWD(cuMipmappedArrayCreate, (CUmipmappedArray *a, const CUDA_ARRAY3D_DESCRIPTOR *d,
			     unsigned int l), (a, d, l))
FWD(cuMipmappedArrayDestroy, (CUmipmappedArray a), (a))
FWD(cuCtxCreate, (CUcontext *c, unsigned int f, CUdevice d), (c, f, d))
FWD(cuCtxCreate_v2, (CUcontext *c, unsigned int f, CUdevice d), (c, f, d))
FWD(cuCtxCreate_v3, (CUcontext *c, CUexecAffinityParam *p, int n, unsigned int f, CUdevice d),
    (c, p, n, f, d))
FWD(cuCtxCreate_v4, (CUcontext *c, CUctxCreateParams *p, unsigned int f, CUdevice d),
    (c, p, f, d))
FWD(cuCtxDestroy, (CUcontext c), (c))
FWD(cuCtxDestroy_v2, (CUcontext c), (c))
FWD(cuDevicePrimaryCtxRetain, (CUcontext *c, CUdevice d), (c, d))
FWD(cuDevicePrimaryCtxRelease, (CUdevice d), (d))
FWD(cuDevicePrimaryCtxRelease_v2, (CUdevice d), (d))
FWD(cuDevicePrimaryCtxReset, (CUdevice d), (d))
FWD(cuDevicePrimaryCtxReset_v2, (CUdevice d), (d))
FWD(cuLaunchKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
		     unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e),
    (f, gx, gy, gz, bx, by, bz, sh, s, p, e))
FWD(cuLaunchKernel_ptsz, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
			  unsigned by, unsigned bz, unsigned sh, CUstream s, void **p, void **e),
    (f, gx, gy, gz, bx, by, bz, sh, s, p, e))
FWD(cuLaunchKernelEx, (const CUlaunchConfig *c, CUfunction f, void **p, void **e), (c, f, p, e))
FWD(cuLaunchKernelEx_ptsz, (const CUlaunchConfig *c, CUfunction f, void **p, void **e),
    (c, f, p, e))
FWD(cuLaunchCooperativeKernel, (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
				unsigned by, unsigned bz, unsigned sh, CUstream s, void **p),
    (f, gx, gy, gz, bx, by, bz, sh, s, p))
FWD(cuLaunchCooperativeKernel_ptsz, (CUfunction f, unsigned gx, unsigned gy, unsigned gz,
				     unsigned bx, unsigned by, unsigned bz, unsigned sh,
				     CUstream s, void **p),
    (f, gx, gy, gz, bx, by, bz, sh, s, p))
FWD(cuGraphLaunch, (CUgraphExec g, CUstream s), (g, s))
FWD(cuGraphLaunch_ptsz, (CUgraphExec g, CUstream s), (g, s))
FWD(cuGetProcAddress, (const char *n, void **p, int v, cuuint64_t f), (n, p, v, f))
#ifndef STUB_MINIMAL
FWD(cuGetProcAddress_v2, (const char *n, void **p, int v, cuuint64_t f,
			  CUdriverProcAddressQueryResult *st), (n, p, v, f, st))
FWD(cuMemCreate, (CUmemGenericAllocationHandle *h, size_t n, const CUmemAllocationProp *p,
		  unsigned long long f), (h, n, p, f))
FWD(cuMemRelease, (CUmemGenericAllocationHandle h), (h))
FWD(cuMemRetainAllocationHandle, (CUmemGenericAllocationHandle *h, void *a), (h, a))
FWD(cuMemMap, (CUdeviceptr p, size_t n, size_t o, CUmemGenericAllocationHandle h,
	       unsigned long long f), (p, n, o, h, f))
FWD(cuMemUnmap, (CUdeviceptr p, size_t n), (p, n))
FWD(cuMemAllocAsync, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s))
FWD(cuMemAllocAsync_ptsz, (CUdeviceptr *p, size_t n, CUstream s), (p, n, s))
FWD(cuMemAllocFromPoolAsync, (CUdeviceptr *p, size_t n, CUmemoryPool m, CUstream s),
    (p, n, m, s))
FWD(cuMemAllocFromPoolAsync_ptsz, (CUdeviceptr *p, size_t n, CUmemoryPool m, CUstream s),
    (p, n, m, s))
FWD(cuMemFreeAsync, (CUdeviceptr p, CUstream s), (p, s))
FWD(cuMemFreeAsync_ptsz, (CUdeviceptr p, CUstream s), (p, s))
FWD(cuMemPoolDestroy, (CUmemoryPool m), (m))
FWD(cuGraphInstantiate, (CUgraphExec *x, CUgraph g, CUgraphNode *n, char *l, size_t b),
    (x, g, n, l, b))
FWD(cuGraphInstantiate_v2, (CUgraphExec *x, CUgraph g, CUgraphNode *n, char *l, size_t b),
    (x, g, n, l, b))
FWD(cuGraphInstantiateWithFlags, (CUgraphExec *x, CUgraph g, unsigned long long f), (x, g, f))
FWD(cuGraphInstantiateWithParams, (CUgraphExec *x, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *p),
    (x, g, p))
FWD(cuGraphInstantiateWithParams_ptsz, (CUgraphExec *x, CUgraph g,
					CUDA_GRAPH_INSTANTIATE_PARAMS *p), (x, g, p))
#endif

#define I(name) {#name, (void *)internal_##name}
static const struct {
	const char *name;
	void *fn;
} internal[] = {
	I(cuInit), I(cuMemAlloc), I(cuMemAlloc_v2), I(cuMemAllocPitch), I(cuMemAllocPitch_v2),
	I(cuMemAllocManaged), I(cuMemFree), I(cuMemFree_v2), I(cuMemGetInfo), I(cuMemGetInfo_v2),
	I(cuDeviceTotalMem), I(cuDeviceTotalMem_v2), I(cuArrayCreate), I(cuArrayCreate_v2),
	I(cuArray3DCreate), I(cuArray3DCreate_v2), I(cuArrayDestroy), I(cuMipmappedArrayCreate),
	I(cuMipmappedArrayDestroy), I(cuCtxCreate), I(cuCtxCreate_v2), I(cuCtxCreate_v3),
	I(cuCtxCreate_v4), I(cuCtxDestroy), I(cuCtxDestroy_v2), I(cuDevicePrimaryCtxRetain),
	I(cuDevicePrimaryCtxRelease), I(cuDevicePrimaryCtxRelease_v2), I(cuDevicePrimaryCtxReset),
	I(cuDevicePrimaryCtxReset_v2), I(cuLaunchKernel), I(cuLaunchKernel_ptsz),
	I(cuLaunchKernelEx), I(cuLaunchKernelEx_ptsz), I(cuLaunchCooperativeKernel),
	I(cuLaunchCooperativeKernel_ptsz), I(cuGraphLaunch), I(cuGraphLaunch_ptsz),
	I(cuGetProcAddress),
#ifndef STUB_MINIMAL
	I(cuGetProcAddress_v2), I(cuMemCreate), I(cuMemRelease), I(cuMemRetainAllocationHandle),
	I(cuMemMap), I(cuMemUnmap), I(cuMemAllocAsync), I(cuMemAllocAsync_ptsz),
	I(cuMemAllocFromPoolAsync), I(cuMemAllocFromPoolAsync_ptsz), I(cuMemFreeAsync),
	I(cuMemFreeAsync_ptsz), I(cuMemPoolDestroy), I(cuGraphInstantiate), I(cuGraphInstantiate_v2),
	I(cuGraphInstantiateWithFlags), I(cuGraphInstantiateWithParams),
	I(cuGraphInstantiateWithParams_ptsz),
#endif
};

void *stub_internal_entry(const char *name)
{
	for (size_t i = 0; i < sizeof(internal) / sizeof(internal[0]); i++)
		if (strcmp(internal[i].name, name) == 0)
			return internal[i].fn;
	return NULL;
}
