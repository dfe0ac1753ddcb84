/*
 * symbols.h - the one table of real driver and NVML entry points.
 *
 * VGPU_SYMBOLS lists every symbol libvgpu resolves in the real libraries:
 * HOOK entries are also exported by libvgpu (dlsym and cuGetProcAddress hand
 * out the hook instead of the real function), CALL entries are only called.
 * The enum, the name table and the hook table are all generated from this
 * list, and symbols.c checks the table sizes at compile time.
 *
 * The last column of a hooked driver entry point is the CUDA version that
 * introduced that variant, as cudaTypedefs.h names it (PFN_cuMemAlloc_v3020
 * is cuMemAlloc_v2, introduced in CUDA 3.2); _ptsz variants are the
 * per-thread default stream ones. cuGetProcAddress (procaddr.c) chooses the
 * hook from these by name, version and flags, never by address.
 *
 * Every symbol is optional: a NULL entry turns the dependent feature off.
 */
#ifndef VGPU_SYMBOLS_H
#define VGPU_SYMBOLS_H

#include <stdbool.h>

#include "cuda_api.h"
#include "nvml_api.h"

#define VGPU_SYMBOLS(X)                                                        \
	X(cuInit, CUDA, HOOK, 2000)                                            \
	X(cuGetProcAddress, CUDA, HOOK, 11030)                                 \
	X(cuGetProcAddress_v2, CUDA, HOOK, 12000)                              \
	X(cuMemAlloc, CUDA, HOOK, 2000)                                        \
	X(cuMemAlloc_v2, CUDA, HOOK, 3020)                                     \
	X(cuMemAllocPitch, CUDA, HOOK, 2000)                                   \
	X(cuMemAllocPitch_v2, CUDA, HOOK, 3020)                                \
	X(cuMemAllocManaged, CUDA, HOOK, 6000)                                 \
	X(cuMemFree, CUDA, HOOK, 2000)                                         \
	X(cuMemFree_v2, CUDA, HOOK, 3020)                                      \
	X(cuMemGetInfo, CUDA, HOOK, 2000)                                      \
	X(cuMemGetInfo_v2, CUDA, HOOK, 3020)                                   \
	X(cuDeviceTotalMem, CUDA, HOOK, 2000)                                  \
	X(cuDeviceTotalMem_v2, CUDA, HOOK, 3020)                               \
	X(cuArrayCreate, CUDA, HOOK, 2000)                                     \
	X(cuArrayCreate_v2, CUDA, HOOK, 3020)                                  \
	X(cuArray3DCreate, CUDA, HOOK, 2000)                                   \
	X(cuArray3DCreate_v2, CUDA, HOOK, 3020)                                \
	X(cuArrayDestroy, CUDA, HOOK, 2000)                                    \
	X(cuMipmappedArrayCreate, CUDA, HOOK, 5000)                            \
	X(cuMipmappedArrayDestroy, CUDA, HOOK, 5000)                           \
	X(cuMemCreate, CUDA, HOOK, 10020)                                      \
	X(cuMemRelease, CUDA, HOOK, 10020)                                     \
	X(cuMemRetainAllocationHandle, CUDA, HOOK, 11000)                      \
	X(cuMemMap, CUDA, HOOK, 10020)                                         \
	X(cuMemUnmap, CUDA, HOOK, 10020)                                       \
	X(cuMemAllocAsync, CUDA, HOOK, 11020)                                  \
	X(cuMemAllocAsync_ptsz, CUDA, HOOK, 11020)                             \
	X(cuMemAllocFromPoolAsync, CUDA, HOOK, 11020)                          \
	X(cuMemAllocFromPoolAsync_ptsz, CUDA, HOOK, 11020)                     \
	X(cuMemFreeAsync, CUDA, HOOK, 11020)                                   \
	X(cuMemFreeAsync_ptsz, CUDA, HOOK, 11020)                              \
	X(cuMemPoolDestroy, CUDA, HOOK, 11020)                                 \
	X(cuCtxCreate, CUDA, HOOK, 2000)                                       \
	X(cuCtxCreate_v2, CUDA, HOOK, 3020)                                    \
	X(cuCtxCreate_v3, CUDA, HOOK, 11040)                                   \
	X(cuCtxCreate_v4, CUDA, HOOK, 12050)                                   \
	X(cuCtxDestroy, CUDA, HOOK, 2000)                                      \
	X(cuCtxDestroy_v2, CUDA, HOOK, 4000)                                   \
	X(cuDevicePrimaryCtxRetain, CUDA, HOOK, 7000)                          \
	X(cuDevicePrimaryCtxRelease, CUDA, HOOK, 7000)                         \
	X(cuDevicePrimaryCtxRelease_v2, CUDA, HOOK, 11000)                     \
	X(cuDevicePrimaryCtxReset, CUDA, HOOK, 7000)                           \
	X(cuDevicePrimaryCtxReset_v2, CUDA, HOOK, 11000)                       \
	X(cuLaunchKernel, CUDA, HOOK, 4000)                                    \
	X(cuLaunchKernel_ptsz, CUDA, HOOK, 7000)                               \
	X(cuLaunchKernelEx, CUDA, HOOK, 11060)                                 \
	X(cuLaunchKernelEx_ptsz, CUDA, HOOK, 11060)                            \
	X(cuLaunchCooperativeKernel, CUDA, HOOK, 9000)                         \
	X(cuLaunchCooperativeKernel_ptsz, CUDA, HOOK, 9000)                    \
	X(cuGraphLaunch, CUDA, HOOK, 10000)                                    \
	X(cuGraphLaunch_ptsz, CUDA, HOOK, 10000)                               \
	X(cuIpcGetMemHandle, CUDA, HOOK, 4010)                                 \
	X(cuMemExportToShareableHandle, CUDA, HOOK, 10020)                     \
	X(cuGraphInstantiate, CUDA, HOOK, 10000)                               \
	X(cuGraphInstantiate_v2, CUDA, HOOK, 11000)                            \
	X(cuGraphInstantiateWithFlags, CUDA, HOOK, 11040)                      \
	X(cuGraphInstantiateWithParams, CUDA, HOOK, 12000)                     \
	X(cuGraphInstantiateWithParams_ptsz, CUDA, HOOK, 12000)                \
	X(cuGraphExecDestroy, CUDA, HOOK, 10000)                               \
	X(cuGraphGetNodes, CUDA, CALL, 0)                                      \
	X(cuGraphNodeGetType, CUDA, CALL, 0)                                   \
	X(cuGraphMemAllocNodeGetParams, CUDA, CALL, 0)                         \
	X(cuStreamIsCapturing, CUDA, CALL, 0)                                  \
	X(cuStreamIsCapturing_ptsz, CUDA, CALL, 0)                             \
	X(cuCtxGetCurrent, CUDA, CALL, 0)                                      \
	X(cuCtxGetDevice, CUDA, CALL, 0)                                       \
	X(cuDeviceGetAttribute, CUDA, CALL, 0)                                 \
	X(cuDeviceGetMemPool, CUDA, CALL, 0)                                   \
	X(cuMemPoolGetAttribute, CUDA, CALL, 0)                                \
	X(cuMemPoolTrimTo, CUDA, CALL, 0)                                      \
	X(cuMemGetAllocationGranularity, CUDA, CALL, 0)                        \
	X(cuMemHostAlloc, CUDA, CALL, 0)                                              \
	X(cuMemFreeHost, CUDA, CALL, 0)                                               \
	X(cuMemHostGetDevicePointer_v2, CUDA, CALL, 0)                                \
	X(cuDeviceGet, CUDA, CALL, 0)                                          \
	X(cuDeviceGetCount, CUDA, CALL, 0)                                     \
	X(cuDeviceGetUuid, CUDA, CALL, 0)                                      \
	X(cuDeviceGetUuid_v2, CUDA, CALL, 0)                                   \
	X(cuCtxPushCurrent_v2, CUDA, CALL, 0)                                  \
	X(cuCtxPopCurrent_v2, CUDA, CALL, 0)                                   \
	X(nvmlDeviceGetMemoryInfo, NVML, HOOK, 0)                              \
	X(nvmlDeviceGetMemoryInfo_v2, NVML, HOOK, 0)                           \
	X(nvmlInit_v2, NVML, CALL, 0)                                          \
	X(nvmlInit, NVML, CALL, 0)                                             \
	X(nvmlDeviceGetCount_v2, NVML, CALL, 0)                                \
	X(nvmlDeviceGetHandleByIndex_v2, NVML, CALL, 0)                        \
	X(nvmlDeviceGetIndex, NVML, CALL, 0)                                   \
	X(nvmlDeviceGetUUID, NVML, CALL, 0)                                    \
	X(nvmlDeviceGetHandleByUUID, NVML, CALL, 0)                            \
	X(nvmlDeviceGetDeviceHandleFromMigDeviceHandle, NVML, CALL, 0)         \
	X(nvmlDeviceGetProcessUtilization, NVML, HOOK, 0)                      \
	X(nvmlDeviceGetComputeRunningProcesses, NVML, HOOK, 0)                 \
	X(nvmlDeviceGetComputeRunningProcesses_v2, NVML, HOOK, 0)              \
	X(nvmlDeviceGetComputeRunningProcesses_v3, NVML, HOOK, 0)              \
	X(nvmlDeviceGetRunningProcessDetailList, NVML, HOOK, 0)                       \
	X(nvmlDeviceGetGraphicsRunningProcesses, NVML, HOOK, 0)                \
	X(nvmlDeviceGetGraphicsRunningProcesses_v2, NVML, HOOK, 0)             \
	X(nvmlDeviceGetGraphicsRunningProcesses_v3, NVML, HOOK, 0)             \
	X(nvmlDeviceGetUtilizationRates, NVML, CALL, 0)

enum vgpu_sym {
#define VGPU_SYM_ENUM(name, lib, kind, version) SYM_##name,
	VGPU_SYMBOLS(VGPU_SYM_ENUM)
#undef VGPU_SYM_ENUM
	SYM_COUNT
};

enum vgpu_lib { VGPU_LIB_CUDA, VGPU_LIB_NVML };

/* Real entry points, filled once by vgpu_symbols_cuda/nvml(), read-only after. */
extern void *vgpu_real[SYM_COUNT];

/*
 * REAL(name): the real entry point with its declared type, or NULL. Read
 * atomically: cuGetProcAddress may replace an entry with the pointer the
 * driver handed out (procaddr.c) while other threads call through it.
 */
#define REAL(name) ((__typeof__(&name))__atomic_load_n(&vgpu_real[SYM_##name], __ATOMIC_RELAXED))

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

/* Hooked driver entry points, for cuGetProcAddress (procaddr.c). */
bool vgpu_sym_is_cuda_hook(enum vgpu_sym sym);
int vgpu_sym_version(enum vgpu_sym sym);      /* CUDA version that introduced the variant */
void *vgpu_sym_hook(enum vgpu_sym sym);        /* libvgpu's entry point */
/* Makes `real` the entry point a hook calls (the driver's own pointer). */
void vgpu_sym_set_real(enum vgpu_sym sym, void *real);

/* The real dlsym, bound once; used by the dlsym hook and the loader. */
typedef void *(*vgpu_dlsym_fn)(void *, const char *);
vgpu_dlsym_fn vgpu_real_dlsym(void);

/* Library handles, for dlsym fall-backs and error reporting. */
void *vgpu_cuda_handle(void);

#endif /* VGPU_SYMBOLS_H */
