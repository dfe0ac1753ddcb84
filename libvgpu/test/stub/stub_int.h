/* stub_int.h - internals shared by the stub driver's source files. */
#ifndef VGPU_STUB_INT_H
#define VGPU_STUB_INT_H

#include "cuda_api.h"
#include "stub.h"

extern int stub_inited;
#define STUB_NEED_INIT()                                                       \
	do {                                                                   \
		if (!stub_inited)                                              \
			return CUDA_ERROR_NOT_INITIALIZED;                     \
	} while (0)

struct stub_ctx {
	int phys;       /* physical (NVML) device index */
	int ordinal;    /* CUDA ordinal it was created with */
};

int stub_phys(CUdevice dev);
int stub_dev_charge(int phys, uint64_t bytes);
void stub_dev_release(int phys, uint64_t bytes);
struct stub_ctx *stub_current(void);
void stub_free_owned(struct stub_ctx *ctx);
void stub_pools_sync(void);
/* cuda_procs.c: processes by host pid. */
struct stub_proc *stub_proc_rec(int phys, int32_t pid, int create);
void stub_proc_mem(int phys, int64_t delta);
void stub_proc_ctx(int phys, int delta);
/* cuda_observer.c: no-ops unless VGPU_STUB_OBSERVER is set. */
void stub_obs_attach(void);
void stub_obs_charge(int phys, uint64_t bytes);
void stub_obs_release(int phys, uint64_t bytes);



/* Entry points the stub defines that libvgpu does not declare. */
CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamSynchronize_ptsz(CUstream s);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
			     unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count);

/* cuda_internal.c: the internal entry point of a hooked function, or NULL. */
void *stub_internal_entry(const char *name);

#endif
