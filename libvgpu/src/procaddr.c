/*
 * procaddr.c - cuGetProcAddress and cuGetProcAddress_v2.
 *
 * CUDA 11.3+ runtimes resolve the whole driver API through these. The real
 * driver chooses the variant (_v2, _ptsz, ...) from the requested CUDA
 * version and flags; libvgpu then swaps the returned pointer for its hook of
 * that exact variant, matched by address against the table of real symbols.
 * Anything not hooked is returned untouched.
 */
#define _GNU_SOURCE
#include "hooks.h"

static void swap(CUresult res, void **pfn)
{
	if (res == CUDA_SUCCESS && pfn != NULL && *pfn != NULL)
		*pfn = vgpu_hook_for_real(*pfn);
}

VGPU_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
					 cuuint64_t flags,
					 CUdriverProcAddressQueryResult *symbolStatus)
{
	VGPU_ENTER_CUDA(cuGetProcAddress_v2);
	CUresult res = REAL(cuGetProcAddress_v2)(symbol, pfn, cudaVersion, flags, symbolStatus);
	swap(res, pfn);
	return res;
}

VGPU_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
				      cuuint64_t flags)
{
	VGPU_ENTER_CUDA(cuGetProcAddress);
	CUresult res = REAL(cuGetProcAddress)(symbol, pfn, cudaVersion, flags);
	swap(res, pfn);
	return res;
}
