/*
 * cuda_share.c - stub driver memory held by more than one process, and peers.
 *
 * CUDA IPC (CUDA Driver API reference, "Memory Management": cuIpcGetMemHandle,
 * cuIpcOpenMemHandle, cuIpcCloseMemHandle). A handle names a cuMemAlloc
 * allocation by its base; another process opens it and gets a pointer of its
 * own to the same memory; opening a handle already open in this process only
 * counts one more reference and returns the same pointer; cuIpcCloseMemHandle
 * drops one and unmaps on the last. The reference calls freeing the memory
 * in the exporter before the importers closed it undefined behaviour; what a
 * driver does then, and what this stub does, is the inconvenient case: the
 * physical memory stays allocated (and the device full by that much) while
 * any importer maps it, and goes with the last close.
 *
 * VMM shareable handles ("Virtual Memory Management":
 * cuMemExportToShareableHandle, cuMemImportFromShareableHandle, with
 * CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR: the exported handle is a file
 * descriptor the application passes to another process over a Unix socket
 * with SCM_RIGHTS, as NCCL >= 2.19 does for its buffers by default: NCCL
 * User Guide, "Environment Variables", NCCL_CUMEM_ENABLE). The
 * export needs the handle type requested at cuMemCreate; the import returns
 * a new allocation handle in the importing process, and cuMemRelease's rule
 * holds across processes: the memory is freed when every handle (the
 * exporter's and the importers') is released and every mapping unmapped.
 * The descriptor here is a memfd naming the shared record, so it survives
 * SCM_RIGHTS and close(2) like the driver's.
 *
 * Both need the stub's state shared between processes (VGPU_STUB_STATE): the
 * records live there. In remote mode they live in the fake driver daemon,
 * as in the kernel driver: EXPORT, IMPORT, UNIMPORT and UNEXPORT
 * (e2e/fakedriver/PROTOCOL.md, "Shared memory").
 *
 * VGPU_STUB_IPC=unsupported: a configuration without CUDA IPC (the reference
 * restricts it to devices with unified addressing on Linux and excludes
 * Tegra): every IPC call answers CUDA_ERROR_NOT_SUPPORTED.
 *
 * Peers ("Peer Context Memory Access": cuDeviceCanAccessPeer,
 * cuCtxEnablePeerAccess, cuCtxDisablePeerAccess; cuMemcpyPeer,
 * cuMemcpyPeerAsync). Two cards reach each other directly when NVLink joins
 * them (VGPU_STUB_NVLINK=1: every card linked to every other, also in NVML's
 * NVLink queries, cuda_remote_dev.c); without it this stub models the
 * inconvenient PCIe topology (cards behind different root ports, or a
 * virtualised one): cuDeviceCanAccessPeer answers 0 and cuCtxEnablePeerAccess
 * fails with CUDA_ERROR_PEER_ACCESS_UNSUPPORTED. cuMemcpyPeer works either
 * way, the driver staging through host memory when there is no direct path.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "remote_int.h"
#include "stub_int.h"

/* ---- the shared records (struct stub_xmem, in the stub's shared state) ---- */

static void xlock(void)
{
	struct stub_shared *g = vgpuStubShared();
	while (__atomic_exchange_n(&g->xlock, 1, __ATOMIC_ACQUIRE) != 0)
		sched_yield();
}

static void xunlock(void) { __atomic_store_n(&vgpuStubShared()->xlock, 0, __ATOMIC_RELEASE); }

static struct stub_xmem *xfind(uint64_t id)
{
	struct stub_shared *g = vgpuStubShared();
	for (int i = 0; id != 0 && i < STUB_MAX_XMEM; i++)
		if (g->xmem[i].id == id && g->xmem[i].refs > 0)
			return &g->xmem[i];
	return NULL;
}

uint64_t stub_xmem_new(int phys, uint64_t size)
{
	struct stub_shared *g = vgpuStubShared();
	uint64_t id = 0;
	if (stub_remote())
		return remote_numbers(&id, 1, "EXPORT %d %llu", remote_daemon_dev(phys),
				      (unsigned long long)size) == ANS_OK ? id : 0;
	xlock();
	for (int i = 0; i < STUB_MAX_XMEM; i++)
		if (g->xmem[i].refs == 0) {
			id = ++g->next_xid;
			g->xmem[i] = (struct stub_xmem){id, size, phys, vgpuStubHostPid(), 1, 0,
							(int32_t)getpid(), 0};
			break;
		}
	xunlock();
	return id;
}

int stub_xmem_get(uint64_t id, int *phys, uint64_t *size)
{
	if (stub_remote()) {
		uint64_t v[2];
		if (remote_numbers(v, 2, "IMPORT %llu", (unsigned long long)id) != ANS_OK)
			return -1;
		*phys = remote_phys_of(v[0]);   /* -1: a card this process does not see, which IPC allows */
		*size = v[1];
		return 0;
	}
	xlock();
	struct stub_xmem *x = xfind(id);
	if (x != NULL) {
		x->refs++;
		*phys = x->phys;
		*size = x->size;
	}
	xunlock();
	return x != NULL ? 0 : -1;
}

/* An importer lets go; the last one frees memory whose owner already did. */
void stub_xmem_put(uint64_t id)
{
	struct stub_xmem gone = {0};
	if (stub_remote()) {
		remote_numbers(NULL, 0, "UNIMPORT %llu", (unsigned long long)id);
		return;
	}
	xlock();
	struct stub_xmem *x = xfind(id);
	if (x != NULL && --x->refs == 0) {
		gone = *x;
		x->id = 0;
	}
	xunlock();
	if (gone.id != 0 && gone.owner_gone)
		stub_dev_release_for(gone.owner, gone.owner_pid, gone.phys, gone.size);
}

int stub_xmem_owner_drop(uint64_t id)
{
	int held = 0;
	/* The daemon frees it or keeps it for the importers: the caller sends no FREE. */
	if (stub_remote())
		return remote_numbers(NULL, 0, "UNEXPORT %llu", (unsigned long long)id) == ANS_OK;
	xlock();
	struct stub_xmem *x = xfind(id);
	if (x != NULL) {
		if (--x->refs == 0) {
			x->id = 0;
		} else {
			x->owner_gone = 1;
			held = 1;
		}
	}
	xunlock();
	return held;
}

/*
 * The exporter of a pool allocation frees it back into its pool
 * (cuda_pool.c): the sharing ends, the memory stays the exporter's, in the
 * pool's reserve, so nothing is released here or at the last importer's
 * free (the daemon's UNSHARE).
 */
void stub_xmem_unshare(uint64_t id)
{
	if (stub_remote()) {
		remote_numbers(NULL, 0, "UNSHARE %llu", (unsigned long long)id);
		return;
	}
	xlock();
	struct stub_xmem *x = xfind(id);
	if (x != NULL && --x->refs == 0)
		x->id = 0;
	xunlock();
}

/* ---- CUDA IPC ---- */

static int ipc_unsupported(void)
{
	const char *v = getenv("VGPU_STUB_IPC");
	return v != NULL && strcmp(v, "unsupported") == 0;
}

#define IPC_MAGIC UINT64_C(0x5354554249504331)
#define MAX_IPC 256

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct { uint64_t dptr, xid; } exported[MAX_IPC];
static struct { uint64_t va, xid; int refs; } opened[MAX_IPC];
static uint64_t next_va = UINT64_C(0x7d0000000000);

int stub_ipc_owner_free(uint64_t dptr)
{
	uint64_t xid = 0;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_IPC; i++)
		if (exported[i].xid != 0 && exported[i].dptr == dptr) {
			xid = exported[i].xid;
			exported[i].xid = 0;
			break;
		}
	pthread_mutex_unlock(&mu);
	return xid != 0 && stub_xmem_owner_drop(xid);
}

CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr)
{
	uint64_t size, xid = 0;
	int phys, slot = -1;
	STUB_NEED_INIT();
	if (ipc_unsupported())
		return CUDA_ERROR_NOT_SUPPORTED;
	if (pHandle == NULL || stub_linear_info(dptr, &size, &phys) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_IPC && xid == 0; i++) {
		if (exported[i].xid != 0 && exported[i].dptr == dptr)
			xid = exported[i].xid;
		else if (exported[i].xid == 0 && slot < 0)
			slot = i;
	}
	if (xid == 0 && slot >= 0 && (xid = stub_xmem_new(phys, size)) != 0) {
		exported[slot].dptr = dptr;
		exported[slot].xid = xid;
	}
	pthread_mutex_unlock(&mu);
	if (xid == 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	uint64_t words[2] = {IPC_MAGIC, xid};
	memset(pHandle, 0, sizeof(*pHandle));
	memcpy(pHandle->reserved, words, sizeof(words));
	return CUDA_SUCCESS;
}

static CUresult ipc_open(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	uint64_t words[2], size;
	int phys;
	(void)flags;
	STUB_NEED_INIT();
	if (ipc_unsupported())
		return CUDA_ERROR_NOT_SUPPORTED;
	if (stub_current() == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	memcpy(words, handle.reserved, sizeof(words));
	if (pdptr == NULL || words[0] != IPC_MAGIC)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	for (int i = 0; i < MAX_IPC; i++)
		if (opened[i].refs > 0 && opened[i].xid == words[1]) {
			opened[i].refs++;       /* already open here: one more reference */
			*pdptr = opened[i].va;
			pthread_mutex_unlock(&mu);
			return CUDA_SUCCESS;
		}
	CUresult res = CUDA_ERROR_OUT_OF_MEMORY;
	for (int i = 0; i < MAX_IPC; i++)
		if (opened[i].refs == 0) {
			if (stub_xmem_get(words[1], &phys, &size) != 0) {
				res = CUDA_ERROR_INVALID_HANDLE;    /* freed and closed everywhere */
				break;
			}
			opened[i].xid = words[1];
			opened[i].refs = 1;
			opened[i].va = next_va;
			next_va += (size + 0x1fffff) & ~UINT64_C(0x1fffff);
			*pdptr = opened[i].va;
			res = CUDA_SUCCESS;
			break;
		}
	pthread_mutex_unlock(&mu);
	return res;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	return ipc_open(pdptr, handle, flags);
}

CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags)
{
	return ipc_open(pdptr, handle, flags);
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr)
{
	uint64_t xid = 0;
	STUB_NEED_INIT();
	pthread_mutex_lock(&mu);
	int found = 0;
	for (int i = 0; i < MAX_IPC && !found; i++)
		if (opened[i].refs > 0 && opened[i].va == dptr) {
			found = 1;
			if (--opened[i].refs == 0)
				xid = opened[i].xid;
		}
	pthread_mutex_unlock(&mu);
	if (!found)
		return CUDA_ERROR_INVALID_VALUE;
	if (xid != 0)
		stub_xmem_put(xid);
	return CUDA_SUCCESS;
}

#ifndef STUB_MINIMAL
/* ---- VMM shareable handles (POSIX file descriptors) ---- */

CUresult cuMemExportToShareableHandle(void *shareableHandle, CUmemGenericAllocationHandle handle,
				      int handleType, unsigned long long flags)
{
	uint64_t xid;
	STUB_NEED_INIT();
	if (shareableHandle == NULL || flags != 0 || handleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult res = stub_vmm_export(handle, handleType, &xid);
	if (res != CUDA_SUCCESS)
		return res;
	/* Each export is a new descriptor the caller owns and closes. */
	int fd = memfd_create("stub-vmm-handle", MFD_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_OUT_OF_MEMORY;
	if (pwrite(fd, &xid, sizeof(xid), 0) != (ssize_t)sizeof(xid)) {
		close(fd);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*(int *)shareableHandle = fd;
	return CUDA_SUCCESS;
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
					int shHandleType)
{
	uint64_t xid = 0, size;
	int phys;
	STUB_NEED_INIT();
	if (handle == NULL || shHandleType != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
		return CUDA_ERROR_INVALID_VALUE;
	/* For POSIX descriptors, osHandle is the descriptor itself cast to a pointer. */
	int fd = (int)(intptr_t)osHandle;
	if (pread(fd, &xid, sizeof(xid), 0) != (ssize_t)sizeof(xid) ||
	    stub_xmem_get(xid, &phys, &size) != 0)
		return CUDA_ERROR_INVALID_VALUE;
	CUresult res = stub_vmm_import(xid, size, handle);
	if (res != CUDA_SUCCESS)
		stub_xmem_put(xid);
	return res;
}
#endif /* STUB_MINIMAL */

/* ---- peers ---- */

static int nvlinked(int a, int b)
{
	struct stub_facts f;
	if (a == b || stub_facts(a, &f) != 0)
		return 0;
	for (int i = 0; i < f.nlinks; i++) {
		char want[32];
		struct stub_facts o;
		if (stub_facts(b, &o) != 0)
			return 0;
		memcpy(want, o.bus_id, sizeof(want));
		if (!f.links[i].to_switch && strcmp(f.links[i].bus_id, want) == 0)
			return 1;
		if (f.links[i].to_switch && o.nlinks > 0)
			return 1;       /* both on an NVSwitch fabric */
	}
	return 0;
}

CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev)
{
	STUB_NEED_INIT();
	int a = stub_phys(dev), b = stub_phys(peerDev);
	if (canAccessPeer == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	if (a < 0 || b < 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*canAccessPeer = nvlinked(a, b);
	return CUDA_SUCCESS;
}

static unsigned char peer_on[STUB_MAX_DEV][STUB_MAX_DEV];

/* The current context's device gains access to peerContext's allocations. */
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags)
{
	STUB_NEED_INIT();
	struct stub_ctx *c = stub_current(), *p = (struct stub_ctx *)peerContext;
	if (c == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (p == NULL || Flags != 0)
		return CUDA_ERROR_INVALID_VALUE;
	if (!nvlinked(c->phys, p->phys))
		return CUDA_ERROR_PEER_ACCESS_UNSUPPORTED;
	pthread_mutex_lock(&mu);
	CUresult res = peer_on[c->phys][p->phys] ? CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED : CUDA_SUCCESS;
	peer_on[c->phys][p->phys] = 1;
	pthread_mutex_unlock(&mu);
	return res;
}

CUresult cuCtxDisablePeerAccess(CUcontext peerContext)
{
	STUB_NEED_INIT();
	struct stub_ctx *c = stub_current(), *p = (struct stub_ctx *)peerContext;
	if (c == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	if (p == NULL)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&mu);
	CUresult res = peer_on[c->phys][p->phys] ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
	peer_on[c->phys][p->phys] = 0;
	pthread_mutex_unlock(&mu);
	return res;
}

/* Copies need no peer access: without a direct path the driver stages them. */
CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
		      CUcontext srcContext, size_t ByteCount)
{
	(void)dstDevice, (void)srcDevice, (void)ByteCount;
	STUB_NEED_INIT();
	if (dstContext == NULL || srcContext == NULL)
		return CUDA_ERROR_INVALID_CONTEXT;
	return CUDA_SUCCESS;
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
			   CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
	(void)hStream;
	return cuMemcpyPeer(dstDevice, dstContext, srcDevice, srcContext, ByteCount);
}
