/*
 * check_ipc.c - ipc_share: memory one process of a container hands to
 * another with CUDA IPC is counted once, on the exporter, for as long as the
 * importer maps it (libvgpu/README.md, "Memory paths").
 *
 * The check process is the exporter: it allocates S = half of what is free
 * after its context, makes an IPC handle (cuIpcGetMemHandle) and starts an
 * importer, this program re-executed (`--ipc-import`) with the same
 * environment, so the same region and limit: one container. The importer
 * opens the handle (cuIpcOpenMemHandle) in a context of its own and reports
 * what cuMemGetInfo_v2 showed it free before and after: opening must not
 * charge it (the same figure, within 2 MiB). The exporter then frees S while
 * the importer still has it open; whether the driver keeps the memory then
 * is undefined in the reference, so libvgpu keeps it counted: a probe of
 * what cuMemGetInfo_v2 showed free just before the free plus 64 MiB must be
 * refused (it would fit had the free given S back). The importer closes and
 * exits. The handle and the answers travel over a socketpair on fd 4.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpu_check.h"

#define CHAN 4
#define OVER (64 * GC_MIB)
#define SLACK (2 * GC_MIB)

extern char **environ;

/* What the importer reports: its result codes and free memory before and after the open. */
struct ipc_report {
	CUresult open, close;
	uint64_t free_before, free_after;
};

/* `gpu_check --ipc-import`: the importer. Its verdict is the exporter's. */
int gc_ipc_import_main(void)
{
	struct gc_api api;
	struct ipc_report rep = {.open = CUDA_ERROR_NOT_INITIALIZED, .close = CUDA_ERROR_NOT_INITIALIZED};
	CUipcMemHandle h;
	CUdeviceptr p = 0;
	CUdevice dev;
	size_t f = 0, t = 0;
	char err[256], go;
	if (gc_api_open(&api, false) != 0 || gc_open_context(&api, &dev, err, sizeof(err)) != 0 ||
	    gc_read_full(CHAN, &h, sizeof(h)) != 0)
		return 1;
	if (api.cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS)
		rep.free_before = f;
	rep.open = api.cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS);
	if (api.cuMemGetInfo_v2(&f, &t) == CUDA_SUCCESS)
		rep.free_after = f;
	if (write(CHAN, &rep, sizeof(rep)) != (ssize_t)sizeof(rep) || gc_read_full(CHAN, &go, 1) != 0)
		return 1;
	rep.close = rep.open == CUDA_SUCCESS ? api.cuIpcCloseMemHandle(p) : CUDA_SUCCESS;
	return write(CHAN, &rep, sizeof(rep)) == (ssize_t)sizeof(rep) ? 0 : 1;
}

static pid_t spawn_importer(int chan)
{
	char exe[4096];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return -1;
	exe[n] = '\0';
	pid_t pid = fork();
	if (pid == 0) {
		dup2(chan, CHAN);
		close(GC_VERDICT_FD);   /* the importer's verdict is the exporter's */
		char *argv[] = {exe, (char *)"--ipc-import", NULL};
		execve(exe, argv, environ);
		_exit(127);
	}
	return pid;
}

static CUresult try_alloc(const struct gc_api *api, size_t bytes)
{
	CUdeviceptr p;
	CUresult r = api->cuMemAlloc_v2(&p, bytes);
	if (r == CUDA_SUCCESS)
		api->cuMemFree_v2(p);
	return r;
}

static uint64_t diff(uint64_t a, uint64_t b) { return a > b ? a - b : b - a; }

int gc_check_ipc_share(const struct gc_api *api, const struct gc_target *t)
{
	static const char *const need[] = {"cuMemGetInfo_v2", "cuMemAlloc_v2", "cuMemFree_v2",
					   "cuIpcGetMemHandle", "cuIpcOpenMemHandle_v2",
					   "cuIpcCloseMemHandle", NULL};
	CUdevice dev;
	CUdeviceptr p;
	CUipcMemHandle h;
	size_t free_b = 0, total = 0;
	int sv[2], st = 0;
	struct ipc_report rep = {0};
	(void)t;
	if (!gc_prepare(api, need, &dev))
		return 0;
	CUresult r = api->cuMemGetInfo_v2(&free_b, &total);
	if (r != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemGetInfo_v2 returned %s", gc_cuerr(api, r));
	size_t size = free_b / 2 / (2 * GC_MIB) * (2 * GC_MIB);
	if (size < OVER)
		return gc_verdict(GC_SKIP, "only %.1f MiB free after the context", gc_mib(free_b));
	if ((r = api->cuMemAlloc_v2(&p, size)) != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "cuMemAlloc_v2(%.1f MiB) returned %s", gc_mib(size), gc_cuerr(api, r));
	if ((r = api->cuIpcGetMemHandle(&h, p)) != CUDA_SUCCESS) {
		api->cuMemFree_v2(p);
		return gc_verdict(r == CUDA_ERROR_NOT_SUPPORTED ? GC_SKIP : GC_FAIL,
				  "cuIpcGetMemHandle returned %s", gc_cuerr(api, r));
	}
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return gc_verdict(GC_FAIL, "socketpair: %s", strerror(errno));
	pid_t pid = spawn_importer(sv[1]);
	close(sv[1]);
	if (pid < 0 || write(sv[0], &h, sizeof(h)) != (ssize_t)sizeof(h) ||
	    gc_read_full(sv[0], &rep, sizeof(rep)) != 0) {
		close(sv[0]);
		return gc_verdict(GC_FAIL, "the importer process did not report (start or open failed)");
	}
	size_t free_now = 0;
	api->cuMemGetInfo_v2(&free_now, &total);      /* both contexts and S counted */
	CUresult freed = api->cuMemFree_v2(p);
	CUresult probe = try_alloc(api, free_now + OVER);
	char go = 'c';
	int ok = write(sv[0], &go, 1) == 1 && gc_read_full(sv[0], &rep, sizeof(rep)) == 0;
	close(sv[0]);
	while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
		;
	if (!ok || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
		return gc_verdict(GC_FAIL, "the importer process failed (status %d)", st);
	if (rep.open != CUDA_SUCCESS || rep.close != CUDA_SUCCESS)
		return gc_verdict(GC_FAIL, "importer: cuIpcOpenMemHandle_v2 %s, cuIpcCloseMemHandle %s",
				  gc_cuerr(api, rep.open), gc_cuerr(api, rep.close));
	if (diff(rep.free_before, rep.free_after) > SLACK)
		return gc_verdict(GC_FAIL, "opening %.1f MiB charged the importer: free %.1f MiB before, "
				  "%.1f MiB after", gc_mib(size), gc_mib(rep.free_before),
				  gc_mib(rep.free_after));
	if (freed != CUDA_SUCCESS || probe != CUDA_ERROR_OUT_OF_MEMORY)
		return gc_verdict(GC_FAIL, "exporter freed %.1f MiB the importer still had open (%s): "
				  "cuMemAlloc_v2(%.1f MiB) want CUDA_ERROR_OUT_OF_MEMORY, got %s",
				  gc_mib(size), gc_cuerr(api, freed), gc_mib(free_now + OVER),
				  gc_cuerr(api, probe));
	return gc_verdict(GC_PASS, "%.1f MiB opened by a second process: it was charged nothing "
			  "(free %.1f MiB before and after); freed by the exporter while open, still "
			  "counted (cuMemAlloc_v2(%.1f MiB) %s)", gc_mib(size), gc_mib(rep.free_after),
			  gc_mib(free_now + OVER), gc_cuerr(api, probe));
}
