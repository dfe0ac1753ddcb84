/*
 * gpu_check.h - shared declarations of gpu_check, the on-node acceptance test
 * of libvgpu against a real NVIDIA driver (see gpu_check.c for usage).
 *
 * No CUDA toolkit is needed: the driver and NVML types come from libvgpu's
 * own declarations (../include), the few gpu_check needs beyond them are
 * declared below from the CUDA Driver API and NVML references, under gc_
 * names so that they can never clash with libvgpu's headers as those grow.
 * Every entry point is resolved at run time with dlopen + dlsym, as CUDA
 * runtimes do, so that the preloaded libvgpu sees exactly what an
 * application's calls look like.
 */
#ifndef GPU_CHECK_H
#define GPU_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../include/cuda_api.h"
#include "../include/nvml_api.h"

#define GC_MIB (UINT64_C(1) << 20)
/* What nvml_memory and nvidia_smi hold while they look. */
#define GC_HELD (256 * GC_MIB)

static inline double gc_mib(uint64_t bytes) { return (double)bytes / (double)GC_MIB; }

/* CUuuid (Driver API reference, "Data types used by CUDA driver"). */
typedef struct {
	unsigned char bytes[16];
} gc_uuid;

/* CUmodule: an opaque handle, like every driver object. */
typedef struct gc_module_st *gc_module;

/* CUmemAccessDesc and the values gpu_check passes ("Virtual Memory Management"). */
typedef struct {
	CUmemLocation location;
	int flags;                  /* CUmemAccess_flags */
} gc_mem_access_desc;

enum {
	GC_MEM_ACCESS_FLAGS_PROT_READWRITE = 0x3,
	GC_MEM_ALLOC_GRANULARITY_MINIMUM = 0x0,
};

/*
 * Every entry point gpu_check may call: library, name, return type,
 * parameters. All are optional at load time; a check names the ones it needs
 * (gc_missing) and is skipped, naming them, when the driver lacks any.
 */
#define GC_ENTRY_POINTS(X)                                                                     \
	X(CUDA, cuInit, CUresult, (unsigned int flags))                                        \
	X(CUDA, cuGetErrorName, CUresult, (CUresult error, const char **name))                 \
	X(CUDA, cuDeviceGetCount, CUresult, (int *count))                                      \
	X(CUDA, cuDeviceGet, CUresult, (CUdevice *dev, int ordinal))                           \
	X(CUDA, cuDeviceGetName, CUresult, (char *name, int len, CUdevice dev))                \
	X(CUDA, cuDeviceGetUuid, CUresult, (gc_uuid *uuid, CUdevice dev))                      \
	X(CUDA, cuDeviceGetUuid_v2, CUresult, (gc_uuid *uuid, CUdevice dev))                   \
	X(CUDA, cuDeviceTotalMem_v2, CUresult, (size_t *bytes, CUdevice dev))                  \
	X(CUDA, cuDeviceGetAttribute, CUresult, (int *value, int attrib, CUdevice dev))        \
	X(CUDA, cuDevicePrimaryCtxRetain, CUresult, (CUcontext *ctx, CUdevice dev))            \
	X(CUDA, cuCtxCreate_v2, CUresult,                                                      \
	  (CUcontext *ctx, unsigned int flags, CUdevice dev))                                  \
	X(CUDA, cuCtxSetCurrent, CUresult, (CUcontext ctx))                                    \
	X(CUDA, cuCtxSynchronize, CUresult, (void))                                            \
	X(CUDA, cuMemGetInfo_v2, CUresult, (size_t *free_bytes, size_t *total_bytes))          \
	X(CUDA, cuMemAlloc_v2, CUresult, (CUdeviceptr *dptr, size_t bytes))                    \
	X(CUDA, cuMemFree_v2, CUresult, (CUdeviceptr dptr))                                    \
	X(CUDA, cuMemGetAllocationGranularity, CUresult,                                       \
	  (size_t *granularity, const CUmemAllocationProp *prop, int option))                  \
	X(CUDA, cuMemCreate, CUresult,                                                         \
	  (CUmemGenericAllocationHandle *handle, size_t size,                                  \
	   const CUmemAllocationProp *prop, unsigned long long flags))                         \
	X(CUDA, cuMemRelease, CUresult, (CUmemGenericAllocationHandle handle))                 \
	X(CUDA, cuMemAddressReserve, CUresult,                                                 \
	  (CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,                  \
	   unsigned long long flags))                                                          \
	X(CUDA, cuMemAddressFree, CUresult, (CUdeviceptr ptr, size_t size))                    \
	X(CUDA, cuMemMap, CUresult,                                                            \
	  (CUdeviceptr ptr, size_t size, size_t offset,                                        \
	   CUmemGenericAllocationHandle handle, unsigned long long flags))                     \
	X(CUDA, cuMemUnmap, CUresult, (CUdeviceptr ptr, size_t size))                          \
	X(CUDA, cuMemSetAccess, CUresult,                                                      \
	  (CUdeviceptr ptr, size_t size, const gc_mem_access_desc *desc, size_t count))        \
	X(CUDA, cuGetProcAddress, CUresult,                                                    \
	  (const char *symbol, void **pfn, int cuda_version, cuuint64_t flags))                \
	X(CUDA, cuGetProcAddress_v2, CUresult,                                                 \
	  (const char *symbol, void **pfn, int cuda_version, cuuint64_t flags,                 \
	   CUdriverProcAddressQueryResult *status))                                            \
	X(CUDA, cuModuleLoadData, CUresult, (gc_module *module, const void *image))            \
	X(CUDA, cuModuleGetFunction, CUresult,                                                 \
	  (CUfunction *func, gc_module module, const char *name))                              \
	X(CUDA, cuModuleUnload, CUresult, (gc_module module))                                  \
	X(CUDA, cuLaunchKernel, CUresult,                                                      \
	  (CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,                    \
	   unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,              \
	   CUstream stream, void **params, void **extra))                                      \
	X(CUDA, cuIpcGetMemHandle, CUresult, (CUipcMemHandle *handle, CUdeviceptr dptr))      \
	X(CUDA, cuIpcOpenMemHandle_v2, CUresult,                                               \
	  (CUdeviceptr *dptr, CUipcMemHandle handle, unsigned int flags))                      \
	X(CUDA, cuIpcCloseMemHandle, CUresult, (CUdeviceptr dptr))                             \
	X(CUDA, cuDeviceCanAccessPeer, CUresult, (int *can, CUdevice dev, CUdevice peer))      \
	X(CUDA, cuCtxEnablePeerAccess, CUresult, (CUcontext peer, unsigned int flags))         \
	X(CUDA, cuMemcpyPeer, CUresult,                                                        \
	  (CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx,             \
	   size_t bytes))                                                                      \
	X(CUDA, cuMemcpyHtoD_v2, CUresult, (CUdeviceptr dst, const void *src, size_t bytes))   \
	X(CUDA, cuMemcpyDtoH_v2, CUresult, (void *dst, CUdeviceptr src, size_t bytes))         \
	X(NVML, nvmlInit_v2, nvmlReturn_t, (void))                                             \
	X(NVML, nvmlInit, nvmlReturn_t, (void))                                                \
	X(NVML, nvmlDeviceGetCount_v2, nvmlReturn_t, (unsigned int *count))                    \
	X(NVML, nvmlDeviceGetHandleByIndex_v2, nvmlReturn_t,                                   \
	  (unsigned int index, nvmlDevice_t *device))                                          \
	X(NVML, nvmlDeviceGetHandleByUUID, nvmlReturn_t,                                       \
	  (const char *uuid, nvmlDevice_t *device))                                            \
	X(NVML, nvmlDeviceGetUUID, nvmlReturn_t,                                               \
	  (nvmlDevice_t device, char *uuid, unsigned int len))                                 \
	X(NVML, nvmlDeviceGetIndex, nvmlReturn_t,                                              \
	  (nvmlDevice_t device, unsigned int *index))                                          \
	X(NVML, nvmlDeviceGetMemoryInfo, nvmlReturn_t,                                         \
	  (nvmlDevice_t device, nvmlMemory_t *memory))                                         \
	X(NVML, nvmlDeviceGetMemoryInfo_v2, nvmlReturn_t,                                      \
	  (nvmlDevice_t device, nvmlMemory_v2_t *memory))

struct gc_api {
	void *cuda;                 /* dlopen handles; NULL when not loadable */
	void *nvml;
	bool nvml_ready;            /* nvmlInit succeeded */
	nvmlReturn_t nvml_init_rc;
#define GC_FIELD(lib, name, ret, params) ret (*name) params;
	GC_ENTRY_POINTS(GC_FIELD)
#undef GC_FIELD
};

/* driver.c */
int gc_api_open(struct gc_api *api, bool with_nvml);
void *gc_api_sym(const struct gc_api *api, const char *name);
bool gc_missing(const struct gc_api *api, const char *const *names, char *buf, size_t len);
const char *gc_cuerr(const struct gc_api *api, CUresult res);
int gc_open_context(const struct gc_api *api, CUdevice *dev, char *err, size_t len);
bool gc_prepare(const struct gc_api *api, const char *const *need, CUdevice *dev);
void gc_format_uuid(const gc_uuid *uuid, char *buf, size_t len);
int gc_nvml_find(const struct gc_api *api, const char *uuid, nvmlDevice_t *dev,
		 unsigned int *index);
bool gc_preload_ok(const struct gc_api *api, char *err, size_t len);

/* The device under test, as every check process receives it. */
struct gc_target {
	uint64_t limit;             /* CUDA_DEVICE_MEMORY_LIMIT_<i>, bytes */
	char uuid[NVML_DEVICE_UUID_BUFFER_SIZE];
	int index;                  /* its NVML index: libvgpu's container device index */
};

/* target.c */
bool gc_find_gpu(struct gc_api *api, CUdevice *dev, char *name, size_t len);
int gc_describe_target(const struct gc_api *api, int ordinal, CUdevice dev, struct gc_target *t,
		       size_t *total);

/* The line a check process reports to the parent (gpu_check.c reads it). */
enum gc_kind { GC_PASS, GC_FAIL, GC_SKIP, GC_RATE };
#define GC_VERDICT_FD 3
int gc_verdict(enum gc_kind kind, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Reads exactly n bytes from fd: 0, or -1 at end of file or on an error. */
int gc_read_full(int fd, void *buf, size_t n);

/* check_memory.c */
int gc_check_memory_limit(const struct gc_api *api, const struct gc_target *t);
int gc_check_nvml_memory(const struct gc_api *api, const struct gc_target *t);
int gc_check_procaddr(const struct gc_api *api, const struct gc_target *t);

/* check_vmm.c */
int gc_check_vmm_lifetime(const struct gc_api *api, const struct gc_target *t);

/* check_ipc.c */
int gc_check_ipc_share(const struct gc_api *api, const struct gc_target *t);
int gc_ipc_import_main(void);

/*
 * check_peer.c: the checks that need two GPUs. `peer` is the second card,
 * `expect` what cuDeviceCanAccessPeer answered the parent without libvgpu,
 * 0->1 then 1->0 ("11", "00", ...).
 */
int gc_check_peer_access(const struct gc_api *api, const struct gc_target *t,
			 const struct gc_target *peer, const char *expect);
int gc_check_ipc_two_gpus(const struct gc_api *api, const struct gc_target *t,
			  const struct gc_target *peer, const char *expect);
int gc_ipc2_import_main(void);

/* check_smi.c */
int gc_check_nvidia_smi(const struct gc_api *api, const struct gc_target *t);
bool gc_find_in_path(const char *prog, char *buf, size_t len);

/* check_sm.c */
int gc_check_sm_rate(const struct gc_api *api, const struct gc_target *t);
int gc_pidns_main(int argc, char **argv);

#endif /* GPU_CHECK_H */
