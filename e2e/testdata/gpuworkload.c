/*
 * gpuworkload.c - the process the node-side end-to-end tests run in real
 * containers. It reaches the driver as CUDA runtimes do (dlopen of
 * libcuda.so.1 and libnvidia-ml.so.1, cuGetProcAddress), with libvgpu
 * preloaded by the container's /etc/ld.so.preload, and prints what it saw
 * as "key=value" lines. Modes:
 *
 *   fill CHUNK_MIB           allocate chunks until refused; print the total
 *                            and the refusal's CUresult; hold until killed
 *   procs N EACH_MIB         N processes hold EACH_MIB each; a further
 *                            allocation is refused, then granted once the
 *                            first is SIGKILLed
 *   spin SECONDS             launch kernels back to back for SECONDS
 *   nvml                     print NVML's memory figures and process list
 *   devices [once]           print the devices CUDA and NVML list, with
 *                            each CUDA device's memory; hold until killed
 *                            (once: exit 0, as an init container does)
 *   overcommit CHUNK_MIB     with the card full: one request of each
 *                            other allocation family (2 x CHUNK_MIB) and
 *                            its CUresult, then chunks until refused and
 *                            the total with the refusal's CUresult, then
 *                            every successful allocation freed, how many
 *                            frees failed; hold until killed
 *   tp                       a tensor-parallel pair: two processes on
 *                            devices 0 and 1 share buffers both ways by
 *                            CUDA IPC and by VMM descriptors over
 *                            SCM_RIGHTS, each filling its card's share,
 *                            probing it, copying, tearing down; hold
 *                            until killed
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef int CUresult;
typedef int CUdevice;
typedef void *CUcontext;
typedef unsigned long long CUdeviceptr;

static void *cuda, *nvml;
static CUresult (*gpa)(const char *, void **, int, unsigned long long, int *);

static void *sym(void *lib, const char *name)
{
	void *p = dlsym(lib, name);
	if (p == NULL) {
		printf("error=no %s\n", name);
		exit(3);
	}
	return p;
}

/* Entry points as cudart takes them: cuGetProcAddress_v2 at CUDA 12.0. */
static void *proc(const char *name)
{
	void *fn = NULL;
	int status = 0;
	if (gpa(name, &fn, 12000, 0, &status) != 0 || fn == NULL) {
		printf("error=cuGetProcAddress %s\n", name);
		exit(3);
	}
	return fn;
}

static CUcontext context_on(CUdevice dev)
{
	CUresult (*init)(unsigned) = proc("cuInit");
	CUresult (*retain)(CUcontext *, CUdevice) = proc("cuDevicePrimaryCtxRetain");
	CUresult (*set)(CUcontext) = proc("cuCtxSetCurrent");
	CUcontext ctx;
	if (init(0) != 0 || retain(&ctx, dev) != 0 || set(ctx) != 0) {
		printf("error=no context on device %d\n", dev);
		exit(3);
	}
	return ctx;
}

static void context(void) { context_on(0); }

/* Allocates CHUNK MiB pieces until refused; returns MiB allocated. */
static unsigned fill(unsigned chunk, CUresult *last)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUdeviceptr p;
	unsigned total = 0;
	while ((*last = alloc(&p, (size_t)chunk << 20)) == 0)
		total += chunk;
	return total;
}

static int mode_fill(unsigned chunk)
{
	CUresult last;
	context();
	unsigned total = fill(chunk, &last);
	printf("allocated_mib=%u\nrefused=%d\n", total, last);
	fflush(stdout);
	pause();
	return 0;
}

/* CUDA's CUmemAllocationProp and CUDA_ARRAY_DESCRIPTOR (cuda.h), as far as used here. */
typedef struct {
	int type, requested_handle_types;
	struct { int type, id; } location;
	void *win32;
	unsigned char flags[8];
} mem_prop;
typedef struct { size_t width, height; int format; unsigned channels; } array_desc;

/*
 * The families libvgpu keeps on the card's refusal (libvgpu/src/host.c):
 * each asks for `bytes` past what the full card has; prints its CUresult.
 */
static void refused_families(size_t bytes)
{
	CUresult (*managed)(CUdeviceptr *, size_t, unsigned) = proc("cuMemAllocManaged");
	CUresult (*async)(CUdeviceptr *, size_t, void *) = proc("cuMemAllocAsync");
	CUresult (*create)(unsigned long long *, size_t, const mem_prop *, unsigned long long) = proc("cuMemCreate");
	CUresult (*array)(void **, const array_desc *) = proc("cuArrayCreate");
	CUdeviceptr p;
	unsigned long long h;
	void *a;
	mem_prop prop = {.type = 1, .location = {1, 0}};       /* pinned, on device 0 */
	array_desc desc = {4096, bytes / 4096 / 16, 0x20, 4};    /* float4 texels */
	printf("managed=%d\n", managed(&p, bytes, 1));
	printf("async=%d\n", async(&p, bytes, NULL));
	printf("vmm=%d\n", create(&h, bytes, &prop, 0));
	printf("array=%d\n", array(&a, &desc));
}

/*
 * Past the card, within the share: with the card full, libvgpu serves
 * linear memory (cuMemAlloc, cuMemAllocPitch) from host memory
 * (CUDA_OVERSUBSCRIBE) and the other families keep the card's refusal.
 * Fills to the share, then gives everything back; the test reads the
 * driver's peaks for the first part and its current figures for the second.
 */
static int mode_overcommit(unsigned chunk)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUresult (*pitched)(CUdeviceptr *, size_t *, size_t, size_t, unsigned) = proc("cuMemAllocPitch");
	CUresult (*release)(CUdeviceptr) = proc("cuMemFree");
	static CUdeviceptr held[8192];
	unsigned n = 0, failed = 0;
	size_t pitch = 0, bytes = (size_t)2 * chunk << 20;
	CUresult last = 0;
	context();
	refused_families(bytes);
	/* Rows of 1000 bytes, as many as make the two chunks at a 1024-byte pitch. */
	CUresult r = pitched(&held[n], &pitch, 1000, bytes / 1024, 4);
	printf("pitch=%d\npitch_bytes=%zu\n", r, r == 0 ? pitch * (bytes / 1024) : 0);
	n += r == 0;
	unsigned first = n;
	while (n < sizeof(held) / sizeof(held[0]) && (last = alloc(&held[n], (size_t)chunk << 20)) == 0)
		n++;
	printf("allocated_mib=%u\nrefused=%d\n", (n - first) * chunk, last);
	fflush(stdout);
	for (unsigned i = 0; i < n; i++)
		failed += release(held[i]) != 0;
	printf("free_failures=%u\n", failed);
	fflush(stdout);
	pause();
	return 0;
}

/* ---- tp: one rank of a tensor-parallel pair ---- */

#define TP_BUF ((size_t)256 << 20)

/* CUDA's CUipcMemHandle (cuda.h: CU_IPC_HANDLE_SIZE bytes). */
typedef struct { char reserved[64]; } ipc_handle;

/* Rank 0 listens on path, rank 1 connects (rank 0 may not listen yet: up to 60 s). */
static int tp_meet(int rank, const char *path)
{
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", path);
	int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0)
		return -1;
	if (rank == 0) {
		unlink(path);
		if (bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 || listen(s, 1) != 0)
			return -1;
		int c = accept4(s, NULL, NULL, SOCK_CLOEXEC);
		close(s);
		return c;
	}
	for (int i = 0; i < 600; i++) {
		if (connect(s, (struct sockaddr *)&a, sizeof(a)) == 0)
			return s;
		usleep(100000);
	}
	return -1;
}

/* Sends the descriptor (SCM_RIGHTS) and the IPC handle in one message. */
static int tp_send(int s, int fd, const ipc_handle *h)
{
	char ctl[CMSG_SPACE(sizeof(int))] = {0};
	struct iovec iov = {(void *)h, sizeof(*h)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	c->cmsg_level = SOL_SOCKET;
	c->cmsg_type = SCM_RIGHTS;
	c->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(c), &fd, sizeof(int));
	return sendmsg(s, &m, 0) == (ssize_t)sizeof(*h) ? 0 : -1;
}

/* Receives the peer's descriptor and handle; -1 when either is missing. */
static int tp_recv(int s, ipc_handle *h)
{
	char ctl[CMSG_SPACE(sizeof(int))];
	struct iovec iov = {h, sizeof(*h)};
	struct msghdr m = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
	if (recvmsg(s, &m, MSG_WAITALL | MSG_CMSG_CLOEXEC) != (ssize_t)sizeof(*h))
		return -1;
	struct cmsghdr *c = CMSG_FIRSTHDR(&m);
	if (c == NULL || c->cmsg_type != SCM_RIGHTS)
		return -1;
	int fd;
	memcpy(&fd, CMSG_DATA(c), sizeof(int));
	return fd;
}

/* Both ranks reach the same step. */
static int tp_barrier(int s)
{
	char c = 'b';
	return write(s, &c, 1) == 1 && read(s, &c, 1) == 1 ? 0 : -1;
}

/*
 * One rank of two, on device `rank`, as NCCL (its buffers exported as VMM
 * descriptors passed over a Unix socket with SCM_RIGHTS, the default since
 * NCCL 2.19) and vLLM's custom all-reduce (cudaIpcGetMemHandle /
 * cudaIpcOpenMemHandle) set them up: one buffer of its own shared each
 * way, the rest of its card's share filled with working memory but one
 * TP_BUF. The peer's buffers must cost it nothing: that TP_BUF still fits
 * and one MiB more is refused. Then the all-reduce's traffic (peer
 * copies both ways), the imports closed, its own memory freed. Prints
 * r<rank>_spare, r<rank>_over (CUresults), r<rank>_work_mib,
 * r<rank>_copy_failures and r<rank>_teardown_failures; exits 0 when it got
 * that far.
 */
static int tp_rank(int rank, const char *path)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUresult (*release)(CUdeviceptr) = proc("cuMemFree");
	CUresult (*ipc_get)(ipc_handle *, CUdeviceptr) = proc("cuIpcGetMemHandle");
	CUresult (*ipc_open)(CUdeviceptr *, ipc_handle, unsigned) = proc("cuIpcOpenMemHandle");
	CUresult (*ipc_close)(CUdeviceptr) = proc("cuIpcCloseMemHandle");
	CUresult (*create)(unsigned long long *, size_t, const mem_prop *, unsigned long long) = proc("cuMemCreate");
	CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long) = proc("cuMemAddressReserve");
	CUresult (*unreserve)(CUdeviceptr, size_t) = proc("cuMemAddressFree");
	CUresult (*map)(CUdeviceptr, size_t, size_t, unsigned long long, unsigned long long) = proc("cuMemMap");
	CUresult (*unmap)(CUdeviceptr, size_t) = proc("cuMemUnmap");
	CUresult (*vmm_release)(unsigned long long) = proc("cuMemRelease");
	CUresult (*export)(void *, unsigned long long, int, unsigned long long) = proc("cuMemExportToShareableHandle");
	CUresult (*import)(unsigned long long *, void *, int) = proc("cuMemImportFromShareableHandle");
	CUresult (*peer_copy)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t) = proc("cuMemcpyPeer");
	/* Pinned device memory that can be exported as a POSIX descriptor (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR). */
	mem_prop prop = {.type = 1, .requested_handle_types = 1, .location = {1, 0}};
	static CUdeviceptr work[64];
	CUdeviceptr ipc_buf, vmm_va, peer_ipc, peer_va, probe, over;
	unsigned long long mine, theirs;
	ipc_handle h, ph;
	CUcontext ctx;
	static CUdeviceptr bits[512];
	int fd = -1, nwork = 0, nbits = 0, copies = 0, teardown = 0;
	ctx = context_on(rank);
	prop.location.id = rank;
	if (alloc(&ipc_buf, TP_BUF) != 0 || ipc_get(&h, ipc_buf) != 0 || create(&mine, TP_BUF, &prop, 0) != 0 ||
	    reserve(&vmm_va, TP_BUF, 0, 0, 0) != 0 || map(vmm_va, TP_BUF, 0, mine, 0) != 0 ||
	    export(&fd, mine, 1, 0) != 0) {
		printf("error=rank %d: own shared buffers\n", rank);
		return 3;
	}
	/* Working memory until the share is full (the context's memory, which
	 * the driver keeps, included), to the MiB; then one chunk given back:
	 * what is left of the share is exactly that chunk. */
	while (nwork < 64 && alloc(&work[nwork], TP_BUF) == 0)
		nwork++;
	while (nbits < 512 && alloc(&bits[nbits], 1 << 20) == 0)
		nbits++;
	if (nwork == 0 || release(work[--nwork]) != 0) {
		printf("error=rank %d: no room for working memory in the share\n", rank);
		return 3;
	}
	int s = tp_meet(rank, path);
	int pfd = s < 0 || tp_send(s, fd, &h) != 0 ? -1 : tp_recv(s, &ph);
	if (pfd < 0) {
		printf("error=rank %d: no peer on %s: %s\n", rank, path, strerror(errno));
		return 3;
	}
	close(fd);
	/* CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS, as cudaIpcOpenMemHandle passes it. */
	CUresult r[5] = {ipc_open(&peer_ipc, ph, 1), import(&theirs, (void *)(intptr_t)pfd, 1)};
	r[2] = reserve(&peer_va, TP_BUF, 0, 0, 0);
	r[3] = r[1] == 0 && r[2] == 0 ? map(peer_va, TP_BUF, 0, theirs, 0) : -1;
	r[4] = r[1] == 0 ? vmm_release(theirs) : -1;
	if (r[0] != 0 || r[1] != 0 || r[2] != 0 || r[3] != 0 || r[4] != 0) {
		printf("error=rank %d: peer's buffers: ipc_open %d import %d reserve %d map %d release %d\n", rank, r[0], r[1], r[2], r[3], r[4]);
		return 3;
	}
	close(pfd);
	printf("r%d_work_mib=%zu\n", rank, ((size_t)nwork * TP_BUF >> 20) + nbits);
	printf("r%d_spare=%d\n", rank, alloc(&probe, TP_BUF));
	printf("r%d_over=%d\n", rank, alloc(&over, 1 << 20));
	for (int i = 0; i < 20; i++) {
		copies += peer_copy(ipc_buf, ctx, peer_ipc, ctx, TP_BUF) != 0;
		copies += peer_copy(peer_va, ctx, vmm_va, ctx, TP_BUF) != 0;
	}
	printf("r%d_copy_failures=%d\n", rank, copies);
	fflush(stdout);
	if (tp_barrier(s) != 0)
		teardown++;
	teardown += ipc_close(peer_ipc) != 0;
	teardown += unmap(peer_va, TP_BUF) != 0;
	teardown += unreserve(peer_va, TP_BUF) != 0;
	if (tp_barrier(s) != 0)         /* neither maps the other's buffers any more */
		teardown++;
	teardown += release(probe) != 0;
	for (int i = 0; i < nwork; i++)
		teardown += release(work[i]) != 0;
	for (int i = 0; i < nbits; i++)
		teardown += release(bits[i]) != 0;
	teardown += release(ipc_buf) != 0;
	teardown += unmap(vmm_va, TP_BUF) != 0;
	teardown += unreserve(vmm_va, TP_BUF) != 0;
	teardown += vmm_release(mine) != 0;
	close(s);
	printf("r%d_teardown_failures=%d\n", rank, teardown);
	fflush(stdout);
	return 0;
}

/*
 * The pair as one container with two cards runs it (vLLM's tensor
 * parallelism: one pod, a worker process per card; CUDA IPC between
 * processes needs both cards visible to both). Prints tp_done=1 when both
 * ranks exited 0; holds.
 */
static int mode_tp(void)
{
	const char *path = "/tmp/tp.sock";
	int pids[2], ok = 0;
	for (int rank = 0; rank < 2; rank++)
		if ((pids[rank] = fork()) == 0)
			_exit(tp_rank(rank, path));
	for (int rank = 0; rank < 2; rank++) {
		int st;
		ok += waitpid(pids[rank], &st, 0) == pids[rank] && WIFEXITED(st) && WEXITSTATUS(st) == 0;
	}
	printf("tp_done=%d\n", ok == 2);
	fflush(stdout);
	pause();
	return 0;
}

/* A child of procs: a context and one allocation of `mib`; its result on fd w; holds. */
static void hold_one(int w, unsigned mib)
{
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUdeviceptr p;
	context();
	CUresult r = alloc(&p, (size_t)mib << 20);
	if (write(w, &r, sizeof(r)) != sizeof(r))
		_exit(1);
	pause();
	_exit(0);
}

/*
 * N processes of the container hold EACH MiB each through its one region;
 * a further allocation of EACH is refused while they do, and granted once
 * the first of them is SIGKILLed.
 */
static int mode_procs(int n, unsigned each)
{
	int fds[2], pids[16], ok = 0;
	CUresult r;
	if (n > 16 || pipe(fds) != 0)
		return 2;
	for (int i = 0; i < n; i++)
		if ((pids[i] = fork()) == 0)
			hold_one(fds[1], each);
	for (int i = 0; i < n; i++) {
		if (read(fds[0], &r, sizeof(r)) != sizeof(r))
			return 1;
		ok += r == 0;
	}
	printf("holders=%d\nholders_ok=%d\n", n, ok);
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	CUdeviceptr p;
	context();
	printf("probe_before=%d\n", alloc(&p, (size_t)each << 20));
	kill(pids[0], SIGKILL);
	waitpid(pids[0], NULL, 0);
	printf("probe_after=%d\n", alloc(&p, (size_t)each << 20));
	fflush(stdout);
	pause();
	return 0;
}

static int mode_spin(double seconds)
{
	CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			   unsigned, void *, void **, void **) = proc("cuLaunchKernel");
	CUresult (*sync)(void) = proc("cuCtxSynchronize");
	context();
	printf("spinning=1\n");
	fflush(stdout);
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	unsigned long n = 0;
	do {
		if (launch((void *)1, 432, 1, 1, 128, 1, 1, 0, NULL, NULL, NULL) != 0)
			return 1;
		n++;
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((double)(t.tv_sec - t0.tv_sec) + (double)(t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
	sync();
	printf("launches=%lu\n", n);
	return 0;
}

typedef struct { unsigned long long total, free, used; } nvml_memory;
typedef struct { unsigned int pid; unsigned long long used; unsigned gi, ci; } nvml_proc;

static int mode_nvml(void)
{
	int (*init)(void) = sym(nvml, "nvmlInit_v2");
	int (*handle)(unsigned, void **) = sym(nvml, "nvmlDeviceGetHandleByIndex_v2");
	int (*mem)(void *, nvml_memory *) = sym(nvml, "nvmlDeviceGetMemoryInfo");
	int (*procs)(void *, unsigned *, nvml_proc *) = sym(nvml, "nvmlDeviceGetComputeRunningProcesses_v3");
	CUresult (*alloc)(CUdeviceptr *, size_t) = proc("cuMemAlloc");
	void *dev;
	nvml_memory m;
	nvml_proc list[32];
	unsigned n = 32;
	CUdeviceptr p;
	context();
	if (alloc(&p, 256u << 20) != 0 || init() != 0 || handle(0, &dev) != 0 || mem(dev, &m) != 0 ||
	    procs(dev, &n, list) != 0)
		return 1;
	printf("total=%llu\nused=%llu\nself=%d\nprocesses=%u\n", m.total, m.used, getpid(), n);
	for (unsigned i = 0; i < n; i++)
		printf("process=%u:%llu\n", list[i].pid, list[i].used);
	fflush(stdout);
	pause();
	return 0;
}

/* What the container reaches: CUDA's and NVML's device lists. */
static int mode_devices(int once)
{
	CUresult (*init)(unsigned) = proc("cuInit");
	CUresult (*count)(int *) = proc("cuDeviceGetCount");
	CUresult (*get)(CUdevice *, int) = proc("cuDeviceGet");
	CUresult (*total)(size_t *, CUdevice) = proc("cuDeviceTotalMem");
	int (*ninit)(void) = sym(nvml, "nvmlInit_v2");
	int (*ncount)(unsigned *) = sym(nvml, "nvmlDeviceGetCount_v2");
	int n = 0;
	unsigned nn = 0;
	CUresult r = init(0);
	if (r == 0)
		r = count(&n);
	printf("cuda_init=%d\ncuda_devices=%d\n", r, n);
	for (int i = 0; i < n; i++) {
		CUdevice d;
		size_t bytes = 0;
		if (get(&d, i) == 0 && total(&bytes, d) == 0)
			printf("cuda_device_%d_mib=%zu\n", i, bytes >> 20);
	}
	int nr = ninit();
	if (nr == 0)
		nr = ncount(&nn);
	printf("nvml_init=%d\nnvml_devices=%u\n", nr, nn);
	fflush(stdout);
	if (!once)
		pause();
	return 0;
}

/* SIGTERM ends it at once: as a container's pid 1 it would otherwise be
 * ignored (no handler), and every pod deletion would wait out the
 * kubelet's grace period before SIGKILL. */
static void terminate(int sig)
{
	(void)sig;
	_exit(0);
}

int main(int argc, char **argv)
{
	signal(SIGTERM, terminate);
	setvbuf(stdout, NULL, _IOLBF, 0);
	cuda = dlopen("libcuda.so.1", RTLD_NOW);
	nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW);
	if (cuda == NULL || nvml == NULL) {
		printf("error=%s\n", dlerror());
		return 3;
	}
	gpa = sym(cuda, "cuGetProcAddress_v2");
	if (argc == 3 && strcmp(argv[1], "fill") == 0)
		return mode_fill((unsigned)atoi(argv[2]));
	if (argc == 4 && strcmp(argv[1], "procs") == 0)
		return mode_procs(atoi(argv[2]), (unsigned)atoi(argv[3]));
	if (argc == 3 && strcmp(argv[1], "spin") == 0)
		return mode_spin(atof(argv[2]));
	if (argc == 3 && strcmp(argv[1], "overcommit") == 0)
		return mode_overcommit((unsigned)atoi(argv[2]));
	if (argc == 2 && strcmp(argv[1], "nvml") == 0)
		return mode_nvml();
	if (argc == 2 && strcmp(argv[1], "devices") == 0)
		return mode_devices(0);
	if (argc == 3 && strcmp(argv[1], "devices") == 0 && strcmp(argv[2], "once") == 0)
		return mode_devices(1);
	if (argc == 2 && strcmp(argv[1], "tp") == 0)
		return mode_tp();
	fprintf(stderr, "usage: gpuworkload fill MiB | procs N MiB | spin S | nvml | devices [once] | overcommit MiB | tp\n");
	return 2;
}
