/* stub_int.h - internals shared by the stub driver's source files. */
#ifndef VGPU_STUB_INT_H
#define VGPU_STUB_INT_H

#include "cuda_api.h"
#include "stub.h"

/* CUDA_ERROR_UNKNOWN (CUDA Driver API reference), which libvgpu never returns, so cuda_api.h lacks it. */
#define STUB_CUDA_ERROR_UNKNOWN ((CUresult)999)

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
/* CUDA_SUCCESS, CUDA_ERROR_OUT_OF_MEMORY, or CUDA_ERROR_UNKNOWN (remote: no daemon). */
CUresult stub_dev_charge(int phys, uint64_t bytes);
void stub_dev_release(int phys, uint64_t bytes);
struct stub_ctx *stub_current(void);
void stub_free_owned(struct stub_ctx *ctx);
/* cuda_host.c: frees the pinned host memory ctx allocated (its destruction or reset). */
void stub_host_free_owned(struct stub_ctx *ctx);
void stub_pools_sync(void);
/*
 * cuMemFree(_v2) of an address that is no linear allocation: a stream-ordered
 * one goes back to its pool, a graph's unfreed one is released (cuda_pool.c).
 */
CUresult stub_pool_free_plain(CUdeviceptr dptr);
/* cuda_procs.c: processes by host pid. */
struct stub_proc *stub_proc_rec(int phys, int32_t pid, int create);
void stub_proc_mem(int phys, int64_t delta);
void stub_proc_ctx(int phys, int delta);
/* cuda_observer.c: no-ops unless VGPU_STUB_OBSERVER is set. */
void stub_obs_attach(void);
void stub_obs_charge(int phys, uint64_t bytes);
void stub_obs_release(int phys, uint64_t bytes);
/* cuda_remote.c: the daemon's side of remote mode (the rest is in stub.h). */
void stub_remote_attach(void);
CUresult stub_remote_alloc(int phys, uint64_t bytes);
void stub_remote_free(int phys, uint64_t bytes);
void stub_remote_ctx(int phys, int delta);
CUresult stub_remote_launch(int phys, uint64_t work_ns);
CUresult stub_remote_sync(int phys);
int32_t stub_remote_self(void);
uint64_t stub_remote_busy(int phys, int32_t pid);

/* Entry points the stub defines that libvgpu does not declare. */
CUresult cuStreamSynchronize(CUstream s);
CUresult cuStreamSynchronize_ptsz(CUstream s);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props);
CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value);
CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t align, CUdeviceptr addr,
			     unsigned long long flags);
CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const void *desc, size_t count);

/*
 * cuda_share.c: memory held by several processes. The owner's drop returns
 * 1 when importers still hold the memory (the caller must not release the
 * device bytes), 0 when the caller releases them as usual.
 */
uint64_t stub_xmem_new(int phys, uint64_t size);
int stub_xmem_get(uint64_t id, int *phys, uint64_t *size);
void stub_xmem_put(uint64_t id);
int stub_xmem_owner_drop(uint64_t id);
void stub_xmem_unshare(uint64_t id);
int stub_ipc_owner_free(uint64_t dptr);
/* cuda_mem.c: a linear allocation's size and device; VMM export and import. */
int stub_linear_info(uint64_t dptr, uint64_t *size, int *phys);
CUresult stub_vmm_export(uint64_t h, int htype, uint64_t *xid);
CUresult stub_vmm_import(uint64_t xid, uint64_t size, CUmemGenericAllocationHandle *h);
/* The device bytes of a process (host pid, own pid), released by another one (the last importer). */
void stub_dev_release_for(int32_t hostpid, int32_t pid, int phys, uint64_t bytes);
/* This process no longer holds the bytes itself, though the device still does. */
void stub_dev_disown(int phys, uint64_t bytes);
void stub_obs_release_pid(int32_t pid, int phys, uint64_t bytes);
/* cuda_graph.c: stream capture (cuStreamBeginCapture). */
int stub_capturing(CUstream s);
CUresult stub_capture_alloc(CUstream s, CUdeviceptr *dptr, uint64_t size, int phys);
CUresult stub_capture_free(CUstream s, CUdeviceptr dptr);
/* cuda_graph.c: a graph allocation freed outside its graph (cuMemFreeAsync, cuMemFree). */
int stub_graph_free(CUdeviceptr dptr);
/* cuda_graph.c: backs a launched graph's allocations; CUDA_ERROR_INVALID_VALUE: not a stub graph. */
CUresult stub_graph_commit(CUgraphExec h);

/* cuda_share.c and cuda_graph.c entry points libvgpu does not declare (cuGetProcAddress's table). */
CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags);
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags);
CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
					int shHandleType);
CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
CUresult cuCtxDisablePeerAccess(CUcontext peerContext);
CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
		      CUcontext srcContext, size_t ByteCount);
CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
			   CUcontext srcContext, size_t ByteCount, CUstream hStream);

/* cuda_internal.c: the internal entry point of a hooked function, or NULL. */
void *stub_internal_entry(const char *name);

#endif
