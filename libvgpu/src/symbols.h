/*
 * symbols.h - the one table of real driver and NVML entry points.
 *
 * VGPU_SYMBOLS lists every symbol libvgpu resolves in the real libraries:
 * HOOK entries are also exported by libvgpu (dlsym and cuGetProcAddress hand
 * out the hook instead of the real function), CALL entries are only called.
 * The enum, the name table and the hook table are all generated from this
 * list, and symbols.c checks the table sizes at compile time.
 *
 * Every symbol is optional: a NULL entry turns the dependent feature off.
 */
#ifndef VGPU_SYMBOLS_H
#define VGPU_SYMBOLS_H

#include "cuda_api.h"
#include "nvml_api.h"

#define VGPU_SYMBOLS(X)                                                        \
	X(cuInit, CUDA, HOOK)                                                  \
	X(cuGetProcAddress, CUDA, HOOK)                                        \
	X(cuGetProcAddress_v2, CUDA, HOOK)                                     \
	X(cuMemAlloc, CUDA, HOOK)                                              \
	X(cuMemAlloc_v2, CUDA, HOOK)                                           \
	X(cuMemAllocPitch, CUDA, HOOK)                                         \
	X(cuMemAllocPitch_v2, CUDA, HOOK)                                      \
	X(cuMemAllocManaged, CUDA, HOOK)                                       \
	X(cuMemFree, CUDA, HOOK)                                               \
	X(cuMemFree_v2, CUDA, HOOK)                                            \
	X(cuMemGetInfo, CUDA, HOOK)                                            \
	X(cuMemGetInfo_v2, CUDA, HOOK)                                         \
	X(cuDeviceTotalMem, CUDA, HOOK)                                        \
	X(cuDeviceTotalMem_v2, CUDA, HOOK)                                     \
	X(cuArrayCreate, CUDA, HOOK)                                           \
	X(cuArrayCreate_v2, CUDA, HOOK)                                        \
	X(cuArray3DCreate, CUDA, HOOK)                                         \
	X(cuArray3DCreate_v2, CUDA, HOOK)                                      \
	X(cuArrayDestroy, CUDA, HOOK)                                          \
	X(cuMipmappedArrayCreate, CUDA, HOOK)                                  \
	X(cuMipmappedArrayDestroy, CUDA, HOOK)                                 \
	X(cuMemCreate, CUDA, HOOK)                                             \
	X(cuMemRelease, CUDA, HOOK)                                            \
	X(cuMemRetainAllocationHandle, CUDA, HOOK)                             \
	X(cuMemAllocAsync, CUDA, HOOK)                                         \
	X(cuMemAllocAsync_ptsz, CUDA, HOOK)                                    \
	X(cuMemAllocFromPoolAsync, CUDA, HOOK)                                 \
	X(cuMemAllocFromPoolAsync_ptsz, CUDA, HOOK)                            \
	X(cuMemFreeAsync, CUDA, HOOK)                                          \
	X(cuMemFreeAsync_ptsz, CUDA, HOOK)                                     \
	X(cuMemPoolDestroy, CUDA, HOOK)                                        \
	X(cuCtxCreate, CUDA, HOOK)                                             \
	X(cuCtxCreate_v2, CUDA, HOOK)                                          \
	X(cuCtxCreate_v3, CUDA, HOOK)                                          \
	X(cuCtxCreate_v4, CUDA, HOOK)                                          \
	X(cuCtxDestroy, CUDA, HOOK)                                            \
	X(cuCtxDestroy_v2, CUDA, HOOK)                                         \
	X(cuDevicePrimaryCtxRetain, CUDA, HOOK)                                \
	X(cuDevicePrimaryCtxRelease, CUDA, HOOK)                               \
	X(cuDevicePrimaryCtxRelease_v2, CUDA, HOOK)                            \
	X(cuDevicePrimaryCtxReset, CUDA, HOOK)                                 \
	X(cuDevicePrimaryCtxReset_v2, CUDA, HOOK)                              \
	X(cuLaunchKernel, CUDA, HOOK)                                          \
	X(cuLaunchKernel_ptsz, CUDA, HOOK)                                     \
	X(cuLaunchKernelEx, CUDA, HOOK)                                        \
	X(cuLaunchKernelEx_ptsz, CUDA, HOOK)                                   \
	X(cuLaunchCooperativeKernel, CUDA, HOOK)                               \
	X(cuLaunchCooperativeKernel_ptsz, CUDA, HOOK)                          \
	X(cuGraphLaunch, CUDA, HOOK)                                           \
	X(cuGraphLaunch_ptsz, CUDA, HOOK)                                      \
	X(cuCtxGetCurrent, CUDA, CALL)                                         \
	X(cuCtxGetDevice, CUDA, CALL)                                          \
	X(cuDeviceGetAttribute, CUDA, CALL)                                    \
	X(cuDeviceGetMemPool, CUDA, CALL)                                      \
	X(cuMemPoolGetAttribute, CUDA, CALL)                                   \
	X(cuMemPoolTrimTo, CUDA, CALL)                                         \
	X(nvmlDeviceGetMemoryInfo, NVML, HOOK)                                 \
	X(nvmlDeviceGetMemoryInfo_v2, NVML, HOOK)                              \
	X(nvmlInit_v2, NVML, CALL)                                             \
	X(nvmlInit, NVML, CALL)                                                \
	X(nvmlDeviceGetCount_v2, NVML, CALL)                                   \
	X(nvmlDeviceGetHandleByIndex_v2, NVML, CALL)                           \
	X(nvmlDeviceGetIndex, NVML, CALL)                                      \
	X(nvmlDeviceGetUUID, NVML, CALL)                                       \
	X(nvmlDeviceGetProcessUtilization, NVML, CALL)

enum vgpu_sym {
#define VGPU_SYM_ENUM(name, lib, kind) SYM_##name,
	VGPU_SYMBOLS(VGPU_SYM_ENUM)
#undef VGPU_SYM_ENUM
	SYM_COUNT
};

enum vgpu_lib { VGPU_LIB_CUDA, VGPU_LIB_NVML };

/* Real entry points, filled once by vgpu_symbols_cuda/nvml(), read-only after. */
extern void *vgpu_real[SYM_COUNT];

/* REAL(name): the real entry point with its declared type, or NULL. */
#define REAL(name) ((__typeof__(&name))vgpu_real[SYM_##name])

/* Load the real library once (thread-safe, cheap after the first call). */
void vgpu_symbols_cuda(void);
void vgpu_symbols_nvml(void);
int vgpu_cuda_loaded(void);
int vgpu_nvml_loaded(void);

/* Name of a table entry, for logs and lookups. */
const char *vgpu_sym_name(enum vgpu_sym sym);

/*
 * Hook lookup by exported name. Returns 1 and stores the hook (or NULL when the
 * real library lacks the symbol) if libvgpu hooks `name`, else 0.
 */
int vgpu_hook_by_name(const char *name, void **hook);

/* The hook for a real entry point returned by the driver, or `real` itself. */
void *vgpu_hook_for_real(void *real);

/* The real dlsym, bound once; used by the dlsym hook and the loader. */
typedef void *(*vgpu_dlsym_fn)(void *, const char *);
vgpu_dlsym_fn vgpu_real_dlsym(void);

/* Library handles, for dlsym fall-backs and error reporting. */
void *vgpu_cuda_handle(void);

#endif /* VGPU_SYMBOLS_H */
