/*
 * t_share.c - memory that crosses processes and cards (issue 34): CUDA IPC,
 * VMM shareable handles passed over a Unix socket with SCM_RIGHTS, pools
 * shared between processes, peers (graph memory: t_graph.c).
 *
 * The rule under test: a byte is counted once, on the process (container)
 * that allocated it, for as long as the driver keeps it; an importer is
 * never charged; peer and NVLink queries reach the driver unchanged.
 *
 * The exporter and the importer are two processes of one container (one
 * region): the importer talks to the test over the socket on fd 22 in one
 * byte commands ('o' opened, 'c' close now, 'd' done).
 */
#define _GNU_SOURCE
#include "test.h"

#include <stdbool.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHAN 22

/* Extra driver entry points these cases call, as cuda.h declares them. */
CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags);
CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *osHandle,
					int shHandleType);
CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
CUresult cuCtxEnablePeerAccess(CUcontext peerContext, unsigned int Flags);
CUresult cuCtxDisablePeerAccess(CUcontext peerContext);
CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx, size_t n);
CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dstCtx, CUdeviceptr src, CUcontext srcCtx,
			   size_t n, CUstream s);
CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props);
CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool, int handleType,
					  unsigned long long flags);
CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle, int handleType,
					    unsigned long long flags);
CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr);
CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool, CUmemPoolPtrExportData *shareData);
nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t d1, nvmlDevice_t d2, int idx, int *status);
nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link, int *isActive);

/* ---- the channel: bytes, and a descriptor with SCM_RIGHTS ---- */

static int send_msg(int s, char c, int fd)
{
	struct iovec iov = {.iov_base = &c, .iov_len = 1};
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1};
	if (fd >= 0) {
		memset(&u, 0, sizeof(u));
		m.msg_control = u.buf;
		m.msg_controllen = sizeof(u.buf);
		struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(int));
	}
	return sendmsg(s, &m, 0) == 1 ? 0 : -1;
}

/* The byte received (or -1), and the descriptor that came with it in *fd (-1: none). */
static int recv_msg(int s, int *fd)
{
	char c;
	struct iovec iov = {.iov_base = &c, .iov_len = 1};
	union { char buf[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } u;
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.buf,
			   .msg_controllen = sizeof(u.buf)};
	if (fd != NULL)
		*fd = -1;
	if (recvmsg(s, &m, 0) != 1)
		return -1;
	struct cmsghdr *cm = CMSG_FIRSTHDR(&m);
	if (fd != NULL && cm != NULL && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
		memcpy(fd, CMSG_DATA(cm), sizeof(int));
	return (unsigned char)c;
}

/* Spawns an importer child with its end of the channel on fd CHAN; returns our end. */
static int spawn_importer(const char *cmd, int *pid)
{
	int sv[2];
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return -1;
	dup2(sv[1], CHAN);      /* dup2 clears FD_CLOEXEC: the child keeps it */
	close(sv[1]);
	*pid = t_spawn(cmd, NULL, -1);
	close(CHAN);
	return sv[0];
}

/* ---- CUDA IPC ---- */

/* Importer of ipc_exporter: opens the handle it is sent, holds it until told to close. */
static int child_ipc_import(void)
{
	CUipcMemHandle h;
	CUdeviceptr p, q;
	t_ctx(0);
	CHECK(read(CHAN, &h, sizeof(h)) == (ssize_t)sizeof(h), "handle received");
	CHECK_EQ(CU(cuIpcOpenMemHandle_v2)(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
	/* Opened twice in one context: the same pointer, one more reference. */
	CHECK_EQ(CU(cuIpcOpenMemHandle_v2)(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
	CHECK_EQ(q, p);
	/* Never charged to the importer: its own share is still all there. */
	CHECK_EQ(t_mine(0), 0);
	CUdeviceptr own;
	CHECK_EQ(CU(cuMemAlloc_v2)(&own, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(own), CUDA_SUCCESS);
	CHECK_EQ(send_msg(CHAN, 'o', -1), 0);
	CHECK_EQ(recv_msg(CHAN, NULL), 'c');
	CHECK_EQ(CU(cuIpcCloseMemHandle)(p), CUDA_SUCCESS);
	CHECK_EQ(CU(cuIpcCloseMemHandle)(p), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(send_msg(CHAN, 'd', -1), 0);
	return t_failed;
}

/*
 * 1 GiB for the container. The exporter allocates 512 MiB and hands it to
 * another process of the container, then frees it while that process still
 * has it open: the memory stays on the device (the stub, as the driver), so
 * it stays counted, and 600 MiB more do not fit.
 */
static int ipc_exporter(void)
{
	CUdeviceptr a, b;
	CUipcMemHandle h;
	int pid;
	t_watchdog(60);
	t_ctx(0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&a, 512 * MiB), CUDA_SUCCESS);
	/* As the runtime reaches it (cudaIpcGetMemHandle): through cuGetProcAddress. */
	void *fn = NULL;
	CHECK_EQ(CU(cuGetProcAddress_v2)("cuIpcGetMemHandle", &fn, 12000, 0, NULL), CUDA_SUCCESS);
	CHECK(fn == dlsym(RTLD_DEFAULT, "cuIpcGetMemHandle"), "cuGetProcAddress hands out the hook");
	CUresult (*get)(CUipcMemHandle *, CUdeviceptr) = (__typeof__(get))fn;
	CHECK(get != NULL && get(&h, a) == CUDA_SUCCESS, "handle made");
	int s = spawn_importer("child_ipc_import", &pid);
	CHECK(s >= 0 && write(s, &h, sizeof(h)) == (ssize_t)sizeof(h), "handle sent");
	CHECK_EQ(recv_msg(s, NULL), 'o');
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_EQ(t_device_used(0), 512 * MiB);            /* the importer keeps it alive */
	CHECK_EQ(t_mine(0), 512 * MiB);                 /* so it stays counted, on the exporter */
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	t_no_violation();
	CHECK_EQ(send_msg(s, 'c', -1), 0);
	CHECK_EQ(recv_msg(s, NULL), 'd');
	CHECK_EQ(t_wait(pid), 0);
	CHECK_EQ(t_device_used(0), 0);                    /* the last close freed it */
	/*
	 * The exporter cannot learn when the last importer closed (no driver
	 * call says so): the charge stays until the exporter exits (README,
	 * "Memory paths").
	 */
	CHECK_EQ(t_mine(0), 512 * MiB);
	close(s);
	return t_failed;
}

/*
 * A configuration without IPC (VGPU_STUB_IPC=unsupported): the driver's
 * CUDA_ERROR_NOT_SUPPORTED comes through unchanged, and an allocation whose
 * export failed is not exported: its free gives its share back at once.
 */
static int ipc_unsupported(void)
{
	CUdeviceptr a, b;
	CUipcMemHandle h;
	t_ctx(0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&a, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuIpcGetMemHandle)(&h, a), CUDA_ERROR_NOT_SUPPORTED);
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 900 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(b), CUDA_SUCCESS);
	return t_failed;
}

/*
 * Exporter of export_until_exit: 256 MiB exported by IPC handle and 256 MiB
 * by a VMM descriptor, neither ever imported, both freed; 128 MiB never
 * exported, freed. Then it waits to be told to exit.
 */
static int child_export_exit(void)
{
	static const CUmemAllocationProp prop = {
		.type = CU_MEM_ALLOCATION_TYPE_PINNED,
		.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
		.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0},
	};
	CUdeviceptr a, plain;
	CUipcMemHandle h;
	CUmemGenericAllocationHandle v;
	int fd = -1;
	t_ctx(0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&a, 256 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuIpcGetMemHandle)(&h, a), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemCreate)(&v, 256 * MiB, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemExportToShareableHandle)(&fd, v, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&plain, 128 * MiB), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 640 * MiB);
	CHECK_EQ(CU(cuMemFree_v2)(a), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(v), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(plain), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 512 * MiB);     /* the unexported 128 MiB went with its free */
	close(fd);
	CHECK_EQ(send_msg(CHAN, 'x', -1), 0);
	CHECK_EQ(recv_msg(CHAN, NULL), 'q');
	return t_failed;
}

/*
 * The exporter-charge rule, exactly (README, "Memory paths"): from a
 * successful cuIpcGetMemHandle or cuMemExportToShareableHandle on, the
 * allocation is charged to the exporting process until that process exits,
 * whether or not anyone imported it and whenever it is freed; at its exit
 * the region drops it with the rest of the process's usage.
 */
static int export_until_exit(void)
{
	CUdeviceptr b;
	int pid;
	t_watchdog(60);
	t_ctx(0);
	struct vgpu_region *r = t_region();
	CHECK(r != NULL, "the region is mapped");
	if (r == NULL)
		return t_failed;
	int s = spawn_importer("child_export_exit", &pid);
	CHECK(s >= 0, "exporter started");
	CHECK_EQ(recv_msg(s, NULL), 'x');
	CHECK_EQ(r->hdr.mem_used[0], 512 * MiB);   /* freed, exported: still the exporter's */
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(send_msg(s, 'q', -1), 0);
	CHECK_EQ(t_wait(pid), 0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 900 * MiB), CUDA_SUCCESS);  /* the exporter is gone: so is its charge */
	CHECK_EQ(r->hdr.mem_used[0], 900 * MiB);
	CHECK_EQ(CU(cuMemFree_v2)(b), CUDA_SUCCESS);
	close(s);
	return t_failed;
}

/* ---- VMM shareable handles, descriptors over SCM_RIGHTS ---- */

static const CUmemAllocationProp fd_prop = {
	.type = CU_MEM_ALLOCATION_TYPE_PINNED,
	.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
	.location = {CU_MEM_LOCATION_TYPE_DEVICE, 0},
};

/* Importer of vmm_fd_export: imports, maps, and holds the mapping until told. */
static int child_vmm_import(void)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr va, own;
	int fd = -1;
	t_ctx(0);
	CHECK_EQ(recv_msg(CHAN, &fd), 'f');
	CHECK(fd >= 0, "a descriptor came with the message");
	CHECK_EQ(CU(cuMemImportFromShareableHandle)(&h, (void *)(intptr_t)fd,
						     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), CUDA_SUCCESS);
	close(fd);      /* the handle holds the memory, not the descriptor */
	CHECK_EQ(STUB(cuMemAddressReserve)(&va, 512 * MiB, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(va, 512 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(h), CUDA_SUCCESS);    /* create-map-release: the mapping holds it */
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&own, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(own), CUDA_SUCCESS);
	CHECK_EQ(send_msg(CHAN, 'o', -1), 0);
	CHECK_EQ(recv_msg(CHAN, NULL), 'c');
	CHECK_EQ(CU(cuMemUnmap)(va, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(send_msg(CHAN, 'd', -1), 0);
	return t_failed;
}

/*
 * NCCL's way (>= 2.19): cuMemCreate with a POSIX descriptor handle type,
 * cuMemExportToShareableHandle, the descriptor to the peer over a Unix
 * socket (SCM_RIGHTS), cuMemImportFromShareableHandle and cuMemMap there.
 * The exporter unmaps and releases while the importer still maps it.
 */
static int vmm_fd_export(void)
{
	CUmemGenericAllocationHandle h;
	CUdeviceptr va, b;
	int pid, fd = -1;
	t_watchdog(60);
	t_ctx(0);
	CHECK_EQ(CU(cuMemCreate)(&h, 512 * MiB, &fd_prop, 0), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuMemAddressReserve)(&va, 512 * MiB, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(va, 512 * MiB, 0, h, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 512 * MiB);
	int s = spawn_importer("child_vmm_import", &pid);
	CHECK_EQ(send_msg(s, 'f', fd), 0);
	close(fd);
	CHECK_EQ(recv_msg(s, NULL), 'o');
	CHECK_EQ(CU(cuMemUnmap)(va, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(h), CUDA_SUCCESS);
	CHECK_EQ(t_device_used(0), 512 * MiB);            /* the importer's mapping keeps it */
	CHECK_EQ(t_mine(0), 512 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	t_no_violation();
	CHECK_EQ(send_msg(s, 'c', -1), 0);
	CHECK_EQ(recv_msg(s, NULL), 'd');
	CHECK_EQ(t_wait(pid), 0);
	CHECK_EQ(t_device_used(0), 0);
	close(s);
	/* A handle created without the descriptor type cannot be exported (the driver says no). */
	CUmemAllocationProp plain = fd_prop;
	plain.requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE;
	CHECK_EQ(CU(cuMemCreate)(&h, 64 * MiB, &plain, 0), CUDA_SUCCESS);
	CHECK(CU(cuMemExportToShareableHandle)(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) != CUDA_SUCCESS,
	      "exported a handle created without a shareable type");
	CHECK_EQ(CU(cuMemRelease)(h), CUDA_SUCCESS);
	return t_failed;
}

/* ---- pools shared between processes ---- */

static CUmemPoolProps pool_props(int htypes)
{
	CUmemPoolProps pp;
	memset(&pp, 0, sizeof(pp));
	pp.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
	pp.handleTypes = htypes;
	pp.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
	pp.location.id = 0;
	return pp;
}

/* Importer of pool_shared: imports the pool and one allocation, frees it when told. */
static int child_pool_import(void)
{
	CUmemoryPool pool;
	CUmemPoolPtrExportData data;
	CUdeviceptr p, own;
	int fd = -1;
	t_ctx(0);
	CHECK_EQ(recv_msg(CHAN, &fd), 'f');
	CHECK(read(CHAN, &data, sizeof(data)) == (ssize_t)sizeof(data), "pointer data received");
	CHECK_EQ(CU(cuMemPoolImportFromShareableHandle)(&pool, (void *)(intptr_t)fd,
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
	close(fd);
	CHECK_EQ(CU(cuMemPoolImportPointer)(&p, pool, &data), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	/* An imported pool allocates nothing; trying charges nothing either. */
	CHECK(CU(cuMemAllocFromPoolAsync)(&own, 64 * MiB, pool, NULL) != CUDA_SUCCESS,
	      "allocated from an imported pool");
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&own, 512 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemFree_v2)(own), CUDA_SUCCESS);
	CHECK_EQ(send_msg(CHAN, 'o', -1), 0);
	CHECK_EQ(recv_msg(CHAN, NULL), 'c');
	CHECK_EQ(CU(cuMemFreeAsync)(p, NULL), CUDA_SUCCESS);   /* importers free first */
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(send_msg(CHAN, 'd', -1), 0);
	return t_failed;
}

/*
 * A pool exported to another process of the container with one allocation
 * imported there: counted once, on the exporter's pool, never on the
 * importer. Then the exporter destroys its pool with an allocation still
 * outstanding: the driver keeps the pool's memory until that allocation is
 * freed (cuMemPoolDestroy), and so must the count.
 */
static int pool_shared(void)
{
	CUmemoryPool pool;
	CUmemPoolPtrExportData data;
	CUdeviceptr a, b, c;
	int pid, fd = -1;
	t_watchdog(60);
	t_ctx(0);
	CUmemPoolProps pp = pool_props(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK_EQ(STUB(cuMemPoolCreate)(&pool, &pp), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAllocFromPoolAsync)(&a, 512 * MiB, pool, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 512 * MiB);
	CHECK_EQ(CU(cuMemPoolExportToShareableHandle)(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemPoolExportPointer)(&data, a), CUDA_SUCCESS);
	int s = spawn_importer("child_pool_import", &pid);
	CHECK_EQ(send_msg(s, 'f', fd), 0);
	close(fd);
	CHECK(write(s, &data, sizeof(data)) == (ssize_t)sizeof(data), "pointer data sent");
	CHECK_EQ(recv_msg(s, NULL), 'o');
	CHECK_EQ(t_mine(0), 512 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(send_msg(s, 'c', -1), 0);
	CHECK_EQ(recv_msg(s, NULL), 'd');
	CHECK_EQ(t_wait(pid), 0);
	close(s);
	t_no_violation();
	/* Destroyed with `a` outstanding: the memory stays until `a` is freed. */
	CHECK_EQ(CU(cuMemPoolDestroy)(pool), CUDA_SUCCESS);
	CHECK_EQ(t_device_used(0), 512 * MiB);
	CHECK_EQ(t_mine(0), 512 * MiB);
	CHECK_EQ(CU(cuMemAlloc_v2)(&c, 600 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	t_no_violation();
	CHECK_EQ(CU(cuMemFreeAsync)(a, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_device_used(0), 0);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&c, 900 * MiB), CUDA_SUCCESS);
	/* A pool created without a shareable type cannot be exported. */
	CUmemPoolProps plain = pool_props(CU_MEM_HANDLE_TYPE_NONE);
	CHECK_EQ(STUB(cuMemPoolCreate)(&pool, &plain), CUDA_SUCCESS);
	CHECK(CU(cuMemPoolExportToShareableHandle)(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
	      CUDA_SUCCESS, "exported a pool created without a shareable type");
	CHECK_EQ(CU(cuMemPoolDestroy)(pool), CUDA_SUCCESS);
	return t_failed;
}

/* ---- a tensor-parallel-shaped pair of ranks ---- */

/*
 * One rank of two, as NCCL and vLLM's custom all-reduce set them up: its
 * buffers shared with the other rank both ways, by a CUDA IPC handle and
 * by a VMM descriptor passed with SCM_RIGHTS, the rest of its share filled
 * with working memory. TP_RANK (0 or 1), TP_DEV (the CUDA device it uses),
 * TP_LIMIT_MIB (its device's limit), TP_SOCK (the Unix socket the ranks
 * meet on: rank 0 listens). Exits 0 when every step went as the rule says:
 * the peer's buffers cost it nothing (the last 64 MiB of its share still
 * fit and one byte more does not), copies between the cards work, and
 * tearing down leaves no error. TP_EAGER=1 tears down as ranks that do not
 * wait for each other do: each frees its own shared buffers while the other
 * still maps them, and must then be refused the memory they held (the
 * card still holds them), until it exits.
 */
#define TP_BUF (256 * MiB)
#define TP_SPARE (64 * MiB)

static int tp_connect(int rank, const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (rank == 0) {
		unlink(path);
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s, 1) != 0) {
			close(s);
			return -1;
		}
		int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		close(s);
		return c;
	}
	for (int i = 0; i < 2000; i++) {        /* rank 0 may not listen yet: up to 20 s */
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
			return s;
		usleep(10000);
	}
	close(s);
	return -1;
}

static int env_int(const char *name, int dflt)
{
	const char *v = getenv(name);
	return v != NULL && *v != '\0' ? atoi(v) : dflt;
}

/* One rank's state. */
struct tp {
	CUcontext ctx;
	CUdeviceptr ipc_buf, vmm_va, peer_ipc, peer_va, probe, work[64];
	CUmemGenericAllocationHandle mine;
	CUipcMemHandle h;
	int nwork, fd, sock;
};

/* Its own buffers (one shared by IPC, one by a VMM descriptor) and working memory up to TP_SPARE short. */
static void tp_own(struct tp *t, int dev, uint64_t limit)
{
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuDevicePrimaryCtxRetain)(&t->ctx, dev), CUDA_SUCCESS);
	CHECK_EQ(CU(cuCtxSetCurrent)(t->ctx), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&t->ipc_buf, TP_BUF), CUDA_SUCCESS);
	CHECK_EQ(CU(cuIpcGetMemHandle)(&t->h, t->ipc_buf), CUDA_SUCCESS);
	CUmemAllocationProp prop = fd_prop;
	prop.location.id = dev;
	CHECK_EQ(CU(cuMemCreate)(&t->mine, TP_BUF, &prop, 0), CUDA_SUCCESS);
	CHECK_EQ(STUB(cuMemAddressReserve)(&t->vmm_va, TP_BUF, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(t->vmm_va, TP_BUF, 0, t->mine, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemExportToShareableHandle)(&t->fd, t->mine, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_SUCCESS);
	while (t->nwork < 64 && (uint64_t)(t->nwork + 1) * TP_BUF + 2 * TP_BUF + TP_SPARE <= limit &&
	       CU(cuMemAlloc_v2)(&t->work[t->nwork], TP_BUF) == CUDA_SUCCESS)
		t->nwork++;
	uint64_t rest = limit - 2 * TP_BUF - (uint64_t)t->nwork * TP_BUF;
	if (rest > TP_SPARE && CU(cuMemAlloc_v2)(&t->work[t->nwork], rest - TP_SPARE) == CUDA_SUCCESS)
		t->nwork++;
}

/* Sends its handle and descriptor, imports and maps the peer's. */
static void tp_import(struct tp *t)
{
	CUipcMemHandle ph;
	CUmemGenericAllocationHandle theirs;
	int pfd = -1;
	CHECK_EQ(send_msg(t->sock, 'f', t->fd), 0);
	close(t->fd);
	CHECK(write(t->sock, &t->h, sizeof(t->h)) == (ssize_t)sizeof(t->h), "handle sent");
	CHECK_EQ(recv_msg(t->sock, &pfd), 'f');
	CHECK(read(t->sock, &ph, sizeof(ph)) == (ssize_t)sizeof(ph), "handle received");
	CHECK_EQ(CU(cuIpcOpenMemHandle_v2)(&t->peer_ipc, ph, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemImportFromShareableHandle)(&theirs, (void *)(intptr_t)pfd,
						     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), CUDA_SUCCESS);
	close(pfd);
	CHECK_EQ(STUB(cuMemAddressReserve)(&t->peer_va, TP_BUF, 0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemMap)(t->peer_va, TP_BUF, 0, theirs, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(theirs), CUDA_SUCCESS);
}

static void tp_barrier(struct tp *t, char c)
{
	CHECK_EQ(send_msg(t->sock, c, -1), 0);
	CHECK_EQ(recv_msg(t->sock, NULL), (unsigned char)c);
}

static void tp_free_shared(struct tp *t)
{
	CHECK_EQ(CU(cuMemFree_v2)(t->ipc_buf), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemUnmap)(t->vmm_va, TP_BUF), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemRelease)(t->mine), CUDA_SUCCESS);
}

/* Closes what it imported and frees its own, the shared buffers first when eager. */
static void tp_teardown(struct tp *t, bool eager)
{
	tp_barrier(t, 'b');
	if (eager) {
		tp_free_shared(t);
		tp_barrier(t, 'e');     /* both freed, both still mapped by the other */
		CUdeviceptr again;
		CHECK_EQ(CU(cuMemAlloc_v2)(&again, TP_BUF), CUDA_ERROR_OUT_OF_MEMORY);
	}
	CHECK_EQ(CU(cuIpcCloseMemHandle)(t->peer_ipc), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemUnmap)(t->peer_va, TP_BUF), CUDA_SUCCESS);
	tp_barrier(t, 'c');
	CHECK_EQ(CU(cuMemFree_v2)(t->probe), CUDA_SUCCESS);
	for (int i = 0; i < t->nwork; i++)
		CHECK_EQ(CU(cuMemFree_v2)(t->work[i]), CUDA_SUCCESS);
	if (!eager)
		tp_free_shared(t);
}

static int tp_rank(void)
{
	int rank = env_int("TP_RANK", 0);
	const char *path = getenv("TP_SOCK");
	struct tp t = {.fd = -1};
	t_watchdog(60);
	CHECK(path != NULL, "TP_SOCK names the meeting socket");
	if (path == NULL)
		return 1;
	tp_own(&t, env_int("TP_DEV", 0), (uint64_t)env_int("TP_LIMIT_MIB", 1024) * MiB);
	t.sock = tp_connect(rank, path);
	CHECK(t.sock >= 0, "rank %d met its peer on %s", rank, path);
	if (t.sock < 0)
		return t_failed;
	tp_import(&t);
	/* The peer's buffers cost nothing: the last TP_SPARE still fits, a MiB more does not. */
	CUdeviceptr over;
	CHECK_EQ(CU(cuMemAlloc_v2)(&t.probe, TP_SPARE), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&over, MiB), CUDA_ERROR_OUT_OF_MEMORY);
	/* The all-reduce's traffic: copies between the cards, both buffers. */
	for (int i = 0; i < 20; i++) {
		CHECK_EQ(CU(cuMemcpyPeer)(t.ipc_buf, t.ctx, t.peer_ipc, t.ctx, TP_BUF), CUDA_SUCCESS);
		CHECK_EQ(CU(cuMemcpyPeerAsync)(t.vmm_va, t.ctx, t.peer_va, t.ctx, TP_BUF, NULL), CUDA_SUCCESS);
	}
	tp_teardown(&t, env_int("TP_EAGER", 0) != 0);
	close(t.sock);
	printf("tp_ok rank=%d work=%d\n", rank, t.nwork);
	return t_failed;
}

/* One container, two processes, two cards: the ranks on devices 0 and 1 of one region. */
static int tp_pair(void)
{
	char sock[512], lim[64];
	t_watchdog(90);
	snprintf(sock, sizeof(sock), "TP_SOCK=%s/tp.sock", t_dir());
	snprintf(lim, sizeof(lim), "TP_LIMIT_MIB=%d", env_int("TP_LIMIT_MIB", 1024));
	const char *e0[] = {sock, lim, "TP_RANK=0", "TP_DEV=0", NULL};
	const char *e1[] = {sock, lim, "TP_RANK=1", "TP_DEV=1", NULL};
	int p0 = t_spawn("tp_rank", e0, -1), p1 = t_spawn("tp_rank", e1, -1);
	CHECK_EQ(t_wait(p0), 0);
	CHECK_EQ(t_wait(p1), 0);
	if (getenv("VGPU_STUB_OBSERVER") != NULL)   /* in a container the daemon judges instead */
		t_no_violation();
	CHECK_EQ(t_device_used(0), 0);
	CHECK_EQ(t_device_used(1), 0);
	return t_failed;
}

/* ---- peers ---- */

/*
 * HAMi #1191, #1764, #2641, #2760, HAMi-core #261: peer and NVLink queries
 * must reach the driver unchanged under a memory limit. PEER_EXPECT=nvlink:
 * the cards are NVLinked (VGPU_STUB_NVLINK=1) and reach each other;
 * otherwise they do not (PCIe without peer support), and that answer too
 * must come through as the driver gives it.
 */
static int peer_passthrough(void)
{
	const char *want = getenv("PEER_EXPECT");
	int nvl = want != NULL && strcmp(want, "nvlink") == 0;
	CUcontext c0, c1;
	CUdeviceptr a, b;
	int can = -1;
	CHECK_EQ(CU(cuInit)(0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuCtxCreate_v2)(&c1, 0, 1), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&b, 64 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuCtxCreate_v2)(&c0, 0, 0), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAlloc_v2)(&a, 64 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuDeviceCanAccessPeer)(&can, 0, 1), CUDA_SUCCESS);
	CHECK_EQ(can, nvl);
	CHECK_EQ(CU(cuDeviceCanAccessPeer)(&can, 1, 0), CUDA_SUCCESS);
	CHECK_EQ(can, nvl);
	CHECK_EQ(CU(cuCtxEnablePeerAccess)(c1, 0), nvl ? CUDA_SUCCESS : CUDA_ERROR_PEER_ACCESS_UNSUPPORTED);
	if (nvl) {
		CHECK_EQ(CU(cuCtxEnablePeerAccess)(c1, 0), CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED);
		CHECK_EQ(CU(cuCtxDisablePeerAccess)(c1), CUDA_SUCCESS);
	}
	CHECK_EQ(CU(cuCtxDisablePeerAccess)(c1), CUDA_ERROR_PEER_ACCESS_NOT_ENABLED);
	/* Copies between the cards work with or without a direct path. */
	CHECK_EQ(CU(cuMemcpyPeer)(b, c1, a, c0, 64 * MiB), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemcpyPeerAsync)(a, c0, b, c1, 64 * MiB, NULL), CUDA_SUCCESS);
	/* NVML: P2P status per capability, and the NVLinks themselves. */
	nvmlDevice_t d0, d1;
	int st = -1;
	CHECK_EQ(NV(nvmlInit_v2)(), NVML_SUCCESS);
	CHECK_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(0, &d0), NVML_SUCCESS);
	CHECK_EQ(NV(nvmlDeviceGetHandleByIndex_v2)(1, &d1), NVML_SUCCESS);
	for (int idx = 0; idx <= 4; idx++) {
		CHECK_EQ(NV(nvmlDeviceGetP2PStatus)(d0, d1, idx, &st), NVML_SUCCESS);
		CHECK_EQ(st, nvl ? 0 : idx == 2 ? 5 : 3);   /* OK; NOT_SUPPORTED; IOH_TOPOLOGY_NOT_SUPPORTED */
	}
	int on = 0;     /* nvmlEnableState_t: NVML_FEATURE_DISABLED 0, _ENABLED 1 */
	CHECK_EQ(NV(nvmlDeviceGetNvLinkState)(d0, 0, &on), nvl ? NVML_SUCCESS : NVML_ERROR_NOT_SUPPORTED);
	CHECK_EQ(on, nvl);
	/* The limit still holds on each card while peers talk. */
	CUdeviceptr big;
	CHECK_EQ(CU(cuMemAlloc_v2)(&big, 1024 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	return t_failed;
}

/*
 * A pool shared between two containers, as a rank hands its stream-ordered
 * buffers to another: POOL_RANK=0 exports (its CUDA device 0), POOL_RANK=1
 * imports and works on its device POOL_DEV (1: the other card), meeting on
 * TP_SOCK. The exporter's pool holds POOL_BUF, exported as a descriptor
 * (SCM_RIGHTS) and one pointer's data; it fills the rest of its share. The
 * importer maps the pointer, is charged nothing on any card, fills its own
 * share on its card, and frees the import first, as the reference requires
 * (cuMemPoolImportPointer); the exporter then frees its allocation back
 * into its pool (still counted: the pool keeps it) and destroys the pool.
 * Each prints "tp_ok" when every step went as the rule says.
 */
#define POOL_BUF (512 * MiB)

static void pool_export_rank(int sock, uint64_t limit)
{
	CUmemoryPool pool;
	CUmemPoolPtrExportData data;
	CUdeviceptr a, fill, over;
	int fd = -1;
	t_ctx(0);
	CUmemPoolProps pp = pool_props(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
	CHECK_EQ(CU(cuMemPoolCreate)(&pool, &pp), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemAllocFromPoolAsync)(&a, POOL_BUF, pool, NULL), CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemPoolExportToShareableHandle)(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
		 CUDA_SUCCESS);
	CHECK_EQ(CU(cuMemPoolExportPointer)(&data, a), CUDA_SUCCESS);
	CHECK_EQ(send_msg(sock, 'f', fd), 0);
	close(fd);
	CHECK(write(sock, &data, sizeof(data)) == (ssize_t)sizeof(data), "pointer data sent");
	CHECK_EQ(recv_msg(sock, NULL), 'o');          /* imported */
	CHECK_EQ(t_mine(0), POOL_BUF);
	CHECK_EQ(CU(cuMemAlloc_v2)(&fill, limit - POOL_BUF), CUDA_SUCCESS);  /* the rest of the share */
	CHECK_EQ(CU(cuMemAlloc_v2)(&over, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuMemFree_v2)(fill), CUDA_SUCCESS);
	CHECK_EQ(send_msg(sock, 'c', -1), 0);
	CHECK_EQ(recv_msg(sock, NULL), 'd');          /* the importer freed its import */
	CHECK_EQ(CU(cuMemFreeAsync)(a, NULL), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), POOL_BUF);                /* back in the pool, still the pool's */
	CHECK_EQ(t_device_used(0), POOL_BUF);           /* and on the card, as the driver keeps it */
	CHECK_EQ(CU(cuMemPoolDestroy)(pool), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(t_device_used(0), 0);
}

static void pool_import_rank(int sock, int dev, uint64_t limit)
{
	CUmemoryPool pool;
	CUmemPoolPtrExportData data;
	CUdeviceptr p, fill, over;
	int fd = -1;
	CUcontext ctx = t_ctx(dev);
	CHECK_EQ(recv_msg(sock, &fd), 'f');
	CHECK(read(sock, &data, sizeof(data)) == (ssize_t)sizeof(data), "pointer data received");
	CHECK_EQ(CU(cuMemPoolImportFromShareableHandle)(&pool, (void *)(intptr_t)fd,
							 CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0), CUDA_SUCCESS);
	close(fd);
	CHECK_EQ(CU(cuMemPoolImportPointer)(&p, pool, &data), CUDA_SUCCESS);
	CHECK_EQ(t_mine(0), 0);
	CHECK_EQ(t_mine(dev), 0);
	CHECK_EQ(send_msg(sock, 'o', -1), 0);
	CHECK_EQ(CU(cuMemAlloc_v2)(&fill, limit), CUDA_SUCCESS);    /* all of its share, on its card */
	CHECK_EQ(CU(cuMemAlloc_v2)(&over, 2 * MiB), CUDA_ERROR_OUT_OF_MEMORY);
	CHECK_EQ(CU(cuMemcpyPeer)(fill, ctx, p, ctx, 64 * MiB), CUDA_SUCCESS);     /* it reads the buffer */
	CHECK_EQ(recv_msg(sock, NULL), 'c');
	CHECK_EQ(CU(cuMemFreeAsync)(p, NULL), CUDA_SUCCESS);       /* importers free first */
	CHECK_EQ(CU(cuMemFree_v2)(fill), CUDA_SUCCESS);
	CHECK_EQ(t_mine(dev), 0);
	CHECK_EQ(send_msg(sock, 'd', -1), 0);
}

static int pool_rank(void)
{
	int rank = env_int("POOL_RANK", 0);
	const char *path = getenv("TP_SOCK");
	uint64_t limit = (uint64_t)env_int("TP_LIMIT_MIB", 1024) * MiB;
	t_watchdog(60);
	CHECK(path != NULL, "TP_SOCK names the meeting socket");
	if (path == NULL)
		return 1;
	int sock = tp_connect(rank, path);
	CHECK(sock >= 0, "rank %d met its peer on %s", rank, path);
	if (sock < 0)
		return t_failed;
	if (rank == 0)
		pool_export_rank(sock, limit);
	else
		pool_import_rank(sock, env_int("POOL_DEV", 1), limit);
	close(sock);
	printf("tp_ok pool rank=%d\n", rank);
	return t_failed;
}

const struct t_case t_share_cases[] = {
	{"ipc_exporter", ipc_exporter},
	{"child_ipc_import", child_ipc_import},
	{"ipc_unsupported", ipc_unsupported},
	{"export_until_exit", export_until_exit},
	{"child_export_exit", child_export_exit},
	{"vmm_fd_export", vmm_fd_export},
	{"child_vmm_import", child_vmm_import},
	{"pool_shared", pool_shared},
	{"child_pool_import", child_pool_import},
	{"tp_rank", tp_rank},
	{"tp_pair", tp_pair},
	{"pool_rank", pool_rank},
	{"peer_passthrough", peer_passthrough},
	{NULL, NULL},
};
